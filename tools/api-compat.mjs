#!/usr/bin/env node
// `make api-compat`: the contract against the highest released one (spec/released/).
//   - spec version == highest released: the spec must equal that released file byte for byte
//     (any edit without a version move fails);
//   - spec version  > highest released: `redocly diff` must pass with the version move required
//     (a breaking change needs a new major, an additive one a new minor, a description a patch);
//     on main (or API_COMPAT_REQUIRE_RELEASED=1) the new version must also be released;
//   - spec version  < highest released: fails.
// Usage: tools/api-compat.mjs [SPEC]; API_COMPAT_RELEASED_DIR names another released folder (tests).
// One process reads and parses each document once; only `redocly diff` runs apart.
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'

process.chdir(path.dirname(path.dirname(fileURLToPath(import.meta.url))))
const revision = process.argv[2] ?? 'spec/openapi.yaml'
const releasedDir = process.env.API_COMPAT_RELEASED_DIR ?? 'spec/released'

const fail = (message) => {
  console.error(`api-compat: ${message}`)
  process.exit(1)
}
/** Negative, zero or positive as version a is lower than, equal to or higher than b. */
const compareVersions = (a, b) => {
  const [x, y] = [a, b].map((v) => v.split('.').map(Number))
  for (let i = 0; i < Math.max(x.length, y.length); i++)
    if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) - (y[i] ?? 0)
  return 0
}

const releasedVersion = (file) => /^openapi-(.+)\.yaml$/.exec(file)?.[1]
const highest = readdirSync(releasedDir)
  .filter(releasedVersion)
  .sort((a, b) => compareVersions(releasedVersion(a), releasedVersion(b)))
  .at(-1)
if (!highest) fail(`no released contract in ${releasedDir}`)
const base = path.join(releasedDir, highest)
const [baseText, revisionText] = [readFileSync(base, 'utf8'), readFileSync(revision, 'utf8')]
const [baseDoc, revisionDoc] = [parse(baseText), parse(revisionText)]
const [baseVersion, version] = [baseDoc.info.version, revisionDoc.info.version]
console.log(`api-compat: ${base} (${baseVersion}) -> ${revision} (${version})`)

if (version === baseVersion) {
  if (baseText === revisionText) {
    console.log(`api-compat: ${version} is the released contract, unchanged`)
    process.exit(0)
  }
  fail(`version not moved: ${revision} differs from released ${base} but info.version is still ${version}`)
}
if (compareVersions(version, baseVersion) < 0) fail(`info.version ${version} is lower than the released ${baseVersion}`)
const branch = (() => {
  try {
    return execFileSync('git', ['rev-parse', '--abbrev-ref', 'HEAD'], { encoding: 'utf8', stdio: 'pipe' }).trim()
  } catch {
    return ''
  }
})()
if ((process.env.API_COMPAT_REQUIRE_RELEASED ?? (branch === 'main' ? '1' : '0')) === '1')
  fail(`${version} is not released: copy the spec to ${releasedDir}/openapi-${version}.yaml (docs/compatibility.md)`)

// `redocly diff` compares operations' own `security` only: an operation that names its scopes
// where it used to inherit the root requirement would read as "authentication became required"
// when nothing changed for callers. Both sides get the inherited requirement spelled out.
const METHODS = ['get', 'put', 'post', 'patch', 'delete', 'options', 'head', 'trace']
const inheritSecurity = (doc) => {
  for (const item of Object.values(doc.paths ?? {}))
    for (const method of METHODS) {
      const op = item[method]
      if (op && op.security === undefined && doc.security !== undefined) op.security = structuredClone(doc.security)
    }
  return doc
}
const work = mkdtempSync(path.join(tmpdir(), 'api-compat-'))
try {
  const [released, revised] = [path.join(work, 'released.json'), path.join(work, 'revision.json')]
  writeFileSync(released, JSON.stringify(inheritSecurity(baseDoc)))
  writeFileSync(revised, JSON.stringify(inheritSecurity(revisionDoc)))
  const diff = spawnSync(
    'node_modules/.bin/redocly',
    [
      'diff',
      released,
      revised,
      '--config',
      'spec/released/redocly-diff.yaml',
      '--fail-on=none',
      '--check-version',
      '--format=markdown',
    ],
    { stdio: 'inherit' },
  )
  process.exitCode = diff.status ?? 1
} finally {
  rmSync(work, { recursive: true, force: true })
}

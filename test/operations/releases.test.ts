// One version each, by name: package.json's version is the service release, spec/openapi.yaml's
// info.version the contract it serves. releases.json names every release with its commit, and
// its newest entry is where the rolling upgrade and make api-compat start.
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { parse } from 'yaml'
import { projectRoot } from '../../src/paths.js'
import { releases } from '../helpers/release-build.js'

interface ReleaseEntry {
  version: string
  contract: string
  commit: string
}

const read = (file: string) => readFileSync(path.join(projectRoot, file), 'utf8')
const atCommit = (commit: string, file: string) =>
  execFileSync('git', ['-C', projectRoot, 'show', `${commit}:${file}`], { encoding: 'utf8', maxBuffer: 16 << 20 })
const compare = (a: string, b: string) => {
  const [x, y] = [a, b].map((v) => v.split('.').map(Number)) as [number[], number[]]
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return (x[i] ?? 0) - (y[i] ?? 0)
  return 0
}

const entries = releases() as ReleaseEntry[]
const released = readdirSync(path.join(projectRoot, 'spec/released'))
  .map((f) => /^openapi-(.+)\.yaml$/.exec(f)?.[1])
  .filter((v): v is string => v !== undefined)
  .sort(compare)
const treeContract = (parse(read('spec/openapi.yaml')) as { info: { version: string } }).info.version
const treeRelease = (JSON.parse(read('package.json')) as { version: string }).version

t.test('every release names its commit, which served the contract it says', async (t) => {
  for (const { version, contract, commit } of entries) {
    t.match(commit, /^[0-9a-f]{40}$/, `${version}: a full commit id`)
    const spec = atCommit(commit, 'spec/openapi.yaml')
    t.equal(
      (parse(spec) as { info: { version: string } }).info.version,
      contract,
      `${version} served contract ${contract}`,
    )
    if (released.includes(contract))
      t.equal(spec, read(`spec/released/openapi-${contract}.yaml`), `${version}: its contract is the released copy`)
  }
})

t.test('every released contract from 1.2.0 on has its release, the newest one last', async (t) => {
  // The tree's own contract is released with the commit that merges it; its service release
  // joins releases.json once that commit exists.
  const shipped = released.filter((v) => compare(v, '1.2.0') >= 0 && v !== treeContract)
  for (const contract of shipped)
    t.ok(
      entries.some((e) => e.contract === contract),
      `contract ${contract} is served by a release in releases.json`,
    )
  const newest = entries.at(-1)!
  t.equal(
    newest.contract,
    shipped.at(-1),
    'the newest release serves the highest released contract (api-compat starts there)',
  )
  t.ok(
    compare(treeRelease, newest.version) > 0,
    `the tree's release ${treeRelease} is after the newest, ${newest.version}`,
  )
  t.ok(
    compare(treeContract, newest.contract) >= 0,
    `the tree's contract ${treeContract} is not below ${newest.contract}`,
  )
})

t.test('the README names the service release and the contract, as package.json and the spec say', async (t) => {
  const readme = read('README.md')
  t.match(readme, `service release ${treeRelease}`, 'the release, by name')
  t.match(readme, `contract ${treeContract}`, 'the contract, by name')
})

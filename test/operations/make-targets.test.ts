// Make targets a reader runs between walks: `make key` needs nothing `make run` does not (no
// install, no rebuild after it), and `make reset` gives the next `make run` a fresh embedded
// database, never under a running server.
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { projectRoot } from '../../src/paths.js'

/** What make would run for these targets, without running it (-n), in this tree's present state. */
const dryRun = (...targets: string[]) =>
  execFileSync('make', ['--no-print-directory', '-n', ...targets], { cwd: projectRoot, encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.trim() !== '' && !/^Node\.js .* is not supported/.test(line))

/**
 * Both plans in one state of the tree: `make test` may finish a build beside the tests, which
 * changes the plans once (stale, then built); taken again when the first plan changed meanwhile.
 */
function plans(a: string, b: string): [string[], string[]] {
  for (;;) {
    const first = dryRun(a)
    const second = dryRun(b)
    if (JSON.stringify(dryRun(a)) === JSON.stringify(first)) return [first, second]
  }
}

t.test('make key does what make run does before its own command, and nothing more', async (t) => {
  const [key, run] = plans('key', 'run')
  t.equal(key.at(-1), 'node dist/src/auth/make-key.js', 'it runs the built key maker')
  t.equal(run.at(-1), 'node dist/src/server.js')
  t.same(key.slice(0, -1), run.slice(0, -1), 'its other steps are the ones make run takes itself')
  t.notOk(
    key.some((line) => /npm ci|npm install/.test(line) && !run.includes(line)),
    'no install of its own',
  )
  t.notOk(
    key.some((line) => /\btouch\b/.test(line) && !run.includes(line)),
    'no stamp that would make the next make run rebuild',
  )
})

t.test('make reset removes the embedded database, but not under a running server', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'reset-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const dataDir = path.join(dir, 'pglite')
  const reset = () =>
    spawnSync('make', ['--no-print-directory', 'reset'], {
      cwd: projectRoot,
      env: { ...process.env, PGLITE_DATA_DIR: dataDir },
      encoding: 'utf8',
    })
  mkdirSync(dataDir)
  writeFileSync(path.join(dataDir, 'PG_VERSION'), '17\n')
  // This test's own process stands for a server holding the folder's lock.
  writeFileSync(path.join(dataDir, 'study-service.lock'), `${process.pid}\n`)
  const refused = reset()
  t.not(refused.status, 0, 'refused while the lock holder lives')
  t.match(refused.stderr, `make reset: process ${process.pid} runs on ${dataDir}: stop it first`)
  t.ok(existsSync(path.join(dataDir, 'PG_VERSION')), 'the database is still there')

  writeFileSync(path.join(dataDir, 'study-service.lock'), '999999999\n')
  const done = reset()
  t.equal(done.status, 0, done.stderr)
  t.notOk(existsSync(dataDir), 'removed once no process holds it')
  t.equal(reset().status, 0, 'and again with nothing to remove')
})

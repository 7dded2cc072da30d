// One process per PGlite data folder: a second server on the same folder refuses to start with
// one line; a lock left by a killed process is taken over.
import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync, readFileSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { projectRoot } from '../../src/paths.js'
import { LOCK_FILE, lockDataDir } from '../../src/db/data-dir-lock.js'
import { freePort, SERVER_SCRIPT, startServer } from '../helpers/server-process.js'
import { childEnv, untracked } from '../helpers/child-env.js'

// PGlite's first start (initdb) can take minutes on a
// loaded 2-core CI machine; the steps below are not timed, only allowed to finish.
t.setTimeout(600_000)

/** startServer, after the folder's database exists: initialised here, in this process, first. */
async function initialise(dataDir: string) {
  const { startEmbeddedDatabase } = await import('../../src/db/embedded.js')
  const db = await startEmbeddedDatabase(dataDir)
  await db.stop()
}

function tempDir(t: Test) {
  const dir = mkdtempSync(path.join(tmpdir(), 'pglite-lock-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Runs the server to its exit and returns the exit code and everything it printed. */
function runToExit(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return freePort().then(
    (port) =>
      new Promise((resolve) => {
        const childEnvironment = childEnv({
          LOG_LEVEL: 'warn',
          API_KEYS: 'k',
          DATABASE_URL: '',
          ...env,
          PORT: String(port),
          HOST: '127.0.0.1',
        })
        const child = spawn(...untracked(process.execPath, [SERVER_SCRIPT], childEnvironment), {
          cwd: projectRoot,
          env: childEnvironment,
          stdio: ['ignore', 'pipe', 'pipe'],
        })
        let output = ''
        child.stdout.on('data', (d) => (output += d))
        child.stderr.on('data', (d) => (output += d))
        const timer = setTimeout(() => child.kill('SIGKILL'), 60_000)
        child.on('exit', (code) => {
          clearTimeout(timer)
          resolve({ code, output })
        })
      }),
  )
}

// One folder for the whole story: PGlite's first start (initdb) is the slow part.
t.test("a second server on the same folder refuses to start; a killed holder's lock is taken over", async (t) => {
  const dataDir = tempDir(t)
  const lock = path.join(dataDir, LOCK_FILE)
  await initialise(dataDir)
  t.notOk(existsSync(lock), 'stop() releases the lock')
  const first = await startServer(t, { DATABASE_URL: '', PGLITE_DATA_DIR: dataDir })
  t.equal(readFileSync(lock, 'utf8').trim(), String(first.child.pid), 'the lock names the first process')

  const second = await runToExit({ PGLITE_DATA_DIR: dataDir })
  t.equal(second.code, 1)
  const lines = second.output.trim().split('\n')
  t.equal(lines.length, 1, 'one line')
  t.match(lines[0], `start failed: the embedded database folder ${dataDir} is in use by process ${first.child.pid}`)

  const user = { system_user_id: 'survivor', system_uuid: '0b3d2c1a-4e5f-4a6b-8c7d-9e0f1a2b3c4d' }
  const created = await fetch(`${first.base}/api/v1/user`, {
    method: 'POST',
    headers: { 'x-api-key': 'k', 'content-type': 'application/json', 'idempotency-key': 'lock-1' },
    body: JSON.stringify({ ...user, full_name: 'Survivor' }),
  })
  t.equal(created.status, 201, 'the first server still writes')

  first.child.kill('SIGKILL')
  await first.exited
  t.ok(existsSync(lock), 'SIGKILL leaves the lock behind')

  const third = await startServer(t, { DATABASE_URL: '', PGLITE_DATA_DIR: dataDir })
  t.equal(readFileSync(lock, 'utf8').trim(), String(third.child.pid), 'the stale lock is taken over')
  const read = await fetch(`${third.base}/api/v1/user/${user.system_uuid}/${user.system_user_id}`, {
    headers: { 'x-api-key': 'k' },
  })
  t.equal(read.status, 200, 'the acknowledged write is there')
  third.child.kill('SIGTERM')
  t.equal(await third.exited, 0)
  t.notOk(existsSync(lock), 'a clean stop removes the lock')
})

t.test('lockDataDir: live holder refused, dead holder replaced, release removes only its own lock', async (t) => {
  const dataDir = tempDir(t)
  const file = path.join(dataDir, LOCK_FILE)
  // The parent of this test process is alive for the whole test.
  writeFileSync(file, `${process.ppid}\n`)
  t.throws(() => lockDataDir(dataDir), { name: 'DataDirLockedError', message: `in use by process ${process.ppid}` })
  // A pid above the kernel's pid_max is never alive.
  writeFileSync(file, '4194305\n')
  const release = lockDataDir(dataDir)
  t.equal(readFileSync(file, 'utf8').trim(), String(process.pid))
  release()
  t.notOk(existsSync(file))
})

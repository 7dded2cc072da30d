// Defaults that cannot lose data: qa and prod never fall back to the embedded database (a folder
// that goes with its container) unless asked to, and a start says when the development key is off.
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { ConfigError, loadConfig, startupWarnings } from '../../src/config.js'
import { childEnv, untracked } from '../helpers/child-env.js'
import { createTestDatabase } from '../helpers/database.js'
import { SERVER_SCRIPT, startServer } from '../helpers/server-process.js'
import { waitFor } from '../helpers/wait.js'

const EXIT_DEADLINE_MS = 60_000

/** Runs the server until it exits by itself (or the deadline): its exit code and its output. */
async function runToExit(
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const environment = childEnv({ LOG_LEVEL: 'info', PORT: '0', HOST: '127.0.0.1', ...env })
  const child = spawn(...untracked(process.execPath, [SERVER_SCRIPT], environment), {
    env: environment,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (d) => (stdout += d))
  child.stderr!.on('data', (d) => (stderr += d))
  const deadline = setTimeout(() => child.kill('SIGKILL'), EXIT_DEADLINE_MS)
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  clearTimeout(deadline)
  return { code, stdout, stderr }
}

const folder = () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'prod-defaults-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

t.test('qa and prod without DATABASE_URL are a configuration error unless DATABASE_EMBEDDED=1', async (t) => {
  for (const APP_ENV of ['qa', 'prod']) {
    t.throws(
      () => loadConfig({ APP_ENV, API_KEYS: 'k' }),
      {
        constructor: ConfigError,
        message: `DATABASE_URL is required when APP_ENV=${APP_ENV} (a postgres:// URL), or DATABASE_EMBEDDED=1 for the embedded database in PGLITE_DATA_DIR`,
      },
      APP_ENV,
    )
    t.match(loadConfig({ APP_ENV, API_KEYS: 'k', DATABASE_EMBEDDED: '1' }), {
      databaseUrl: null,
      databaseEmbedded: true,
    })
    t.match(loadConfig({ APP_ENV, API_KEYS: 'k', DATABASE_URL: 'postgres://db/study' }), { databaseEmbedded: false })
  }
  t.match(loadConfig({}), { databaseUrl: null, databaseEmbedded: false }, 'dev runs on the embedded database unasked')
  t.throws(() => loadConfig({ DATABASE_EMBEDDED: 'yes' }), /DATABASE_EMBEDDED must be 0 or 1, got "yes"/)
  t.throws(
    () => loadConfig({ DATABASE_EMBEDDED: '1', DATABASE_URL: 'postgres://db/study' }),
    /DATABASE_EMBEDDED=1 and DATABASE_URL exclude each other/,
  )
})

t.test('APP_ENV=prod without DATABASE_URL stops the start with one line and writes nothing', async (t) => {
  const dataDir = path.join(folder(), 'pglite')
  const run = await runToExit({ APP_ENV: 'prod', API_KEYS: 'k', DATABASE_URL: '', PGLITE_DATA_DIR: dataDir })
  t.equal(run.code, 1, 'the process exits 1')
  t.equal(
    run.stderr,
    'configuration error: DATABASE_URL is required when APP_ENV=prod (a postgres:// URL), or DATABASE_EMBEDDED=1 for the embedded database in PGLITE_DATA_DIR\n',
    'one line on stderr',
  )
  t.equal(run.stdout, '', 'nothing else')
  t.notOk(existsSync(dataDir), 'no embedded database folder was created')
})

t.test('APP_ENV=prod with DATABASE_EMBEDDED=1 starts on the embedded database it was asked for', async (t) => {
  const dataDir = path.join(folder(), 'pglite')
  const server = await startServer(t, {
    APP_ENV: 'prod',
    API_KEYS: 'k',
    DATABASE_URL: '',
    DATABASE_EMBEDDED: '1',
    PGLITE_DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
  })
  t.match(await (await fetch(`${server.base}/live`)).json(), { status: 'alive', app_env: 'prod' }, 'live, as prod')
  t.ok(existsSync(dataDir), 'in the folder named')
  await waitFor('the start names the embedded database', () => /using embedded PostgreSQL/.test(server.output()))
  server.child.kill('SIGTERM')
  await server.exited
})

t.test('an API_KEYS_FILE that turns the development key off says so in one warning line', async (t) => {
  const file = path.join(folder(), 'keys.json')
  writeFileSync(file, JSON.stringify([{ id: 'acme', secret_sha256: 'a'.repeat(64) }]))
  const warning = `API_KEYS_FILE is set and API_KEYS is not: the development key "dev-key-change-me" is not accepted, only the file's keys`
  t.same(startupWarnings(loadConfig({ API_KEYS_FILE: file })), [warning])
  t.same(startupWarnings(loadConfig({ API_KEYS_FILE: file, API_KEYS: 'k' })), [], 'no warning when API_KEYS is set too')
  t.same(
    startupWarnings(loadConfig({ APP_ENV: 'prod', API_KEYS_FILE: file, DATABASE_URL: 'postgres://db/study' })),
    [],
    'none in prod, which never has the development key',
  )

  const db = await createTestDatabase(t)
  const server = await startServer(t, { DATABASE_URL: db.url, API_KEYS: '', API_KEYS_FILE: file, LOG_LEVEL: 'warn' })
  await waitFor('the warning is logged', () => server.output().includes('is not accepted'))
  const lines = server
    .output()
    .split('\n')
    .filter((line) => line.includes('development key'))
  t.equal(lines.length, 1, 'one line')
  t.match(JSON.parse(lines[0]!), { level: 40, msg: warning }, 'a warning')
  const refused = await fetch(`${server.base}/api/v1/admin/keys`, { headers: { 'x-api-key': 'dev-key-change-me' } })
  t.equal(refused.status, 401, 'and the development key is refused')
})

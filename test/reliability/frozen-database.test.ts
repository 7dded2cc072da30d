// A database server that is frozen (SIGSTOP: it keeps its sockets open and answers nothing, so
// its own statement_timeout never fires) holds no request past its deadline: reads and writes
// answer 503 with Retry-After within DATABASE_CONNECTION_WAIT_MS + DATABASE_STATEMENT_TIMEOUT_MS
// plus a second, and the service serves again once the server resumes. On a private PostgreSQL.
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { createClient } from '../../src/db/client.js'
import { migrate } from '../../src/db/migrate.js'
import { NO_LOAD_SHEDDING } from '../helpers/app.js'
import { startPrivatePostgres } from '../helpers/private-postgres.js'
import { freePort } from '../helpers/server-process.js'
import { waitFor, within } from '../helpers/wait.js'

const WAIT_MS = 400
const STATEMENT_MS = 600
const port = await freePort()
const pg = startPrivatePostgres(t, port)
const sql = createClient(pg.url, { max: 4, connectTimeout: 2, statementTimeoutMs: STATEMENT_MS })
t.teardown(() => sql.end({ timeout: 1 }))
await migrate(sql)
const app = await buildApp({
  config: loadConfig({
    API_KEYS: 'k',
    LOG_LEVEL: 'silent',
    DATABASE_CONNECTION_WAIT_MS: String(WAIT_MS),
    DATABASE_STATEMENT_TIMEOUT_MS: String(STATEMENT_MS),
    ...NO_LOAD_SHEDDING,
  }),
  sql,
  logger: false,
})
t.teardown(() => app.close())
const headers = { 'x-api-key': 'k' }
const owner = { system_user_id: 'frozen', system_uuid: randomUUID() }
const userUrl = `/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`

/** The server's processes: the postmaster (first line of postmaster.pid) and its children. */
function serverPids(): number[] {
  const [dataDir] = execFileSync('runuser', [
    '-u',
    'postgres',
    '--',
    'psql',
    '-At',
    '-h',
    '127.0.0.1',
    '-p',
    String(port),
    '-c',
    'show data_directory',
  ])
    .toString()
    .trim()
    .split('\n')
  const postmaster = Number(readFileSync(path.join(dataDir!, 'postmaster.pid'), 'utf8').split('\n')[0])
  const children = execFileSync('ps', ['-o', 'pid=', '--ppid', String(postmaster)])
    .toString()
    .split('\n')
    .map((l) => Number(l.trim()))
    .filter((n) => n > 0)
  return [postmaster, ...children]
}

t.test('a frozen server: every request answers 503 within its deadline, and service resumes after', async (t) => {
  const created = await app.inject({
    method: 'POST',
    url: '/api/v1/user',
    headers: { ...headers, 'idempotency-key': 'before' },
    payload: { ...owner, full_name: 'F' },
  })
  t.equal(created.statusCode, 201)

  const pids = serverPids()
  const signal = (name: NodeJS.Signals) => {
    for (const pid of pids) {
      try {
        process.kill(pid, name)
      } catch {
        // gone already
      }
    }
  }
  signal('SIGSTOP')
  t.teardown(() => signal('SIGCONT'))

  const requests = [
    () => app.inject({ method: 'GET', url: userUrl, headers }),
    () =>
      app.inject({
        method: 'PATCH',
        url: userUrl,
        headers: { ...headers, 'idempotency-key': randomUUID() },
        payload: { username: 'frozen' },
      }),
    () =>
      app.inject({
        method: 'POST',
        url: '/api/v1/conspectuses',
        headers: { ...headers, 'idempotency-key': randomUUID() },
        payload: { ...owner, title: 't', cue_sheet: {}, dense_paragraph: 'p', bullets: [] },
      }),
    () => app.inject({ method: 'DELETE', url: userUrl, headers }),
  ]
  const answers = await within(
    'every request to answer while the server is frozen',
    Promise.all(
      requests.map(async (send) => {
        const started = performance.now()
        const res = await send()
        return { res, ms: performance.now() - started }
      }),
    ),
    15_000,
  )
  for (const { res, ms } of answers) {
    t.equal(res.statusCode, 503)
    t.ok(Number(res.headers['retry-after']) > 0, 'carries Retry-After')
    t.ok(ms < WAIT_MS + STATEMENT_MS + 1000, `answered within the deadline plus a second (${Math.round(ms)} ms)`)
  }

  signal('SIGCONT')
  const read = await waitFor('the service to read again', async () => {
    const res = await app.inject({ method: 'GET', url: userUrl, headers })
    return res.statusCode === 200 ? res : undefined
  })
  t.equal(read.json().system_user_id, owner.system_user_id, 'the learner is still there: nothing was erased')
  await waitFor('every connection given back', () => app.db.usage.reserved === 0)
})

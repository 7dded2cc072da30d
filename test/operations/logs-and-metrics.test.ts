// What an operator reads: one log line per request with its error code and route template,
// and /metrics with build info, pool gauges and the error, replay, conflict and 429 counters.
import t from 'tap'
import { Writable } from 'node:stream'
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import pino from 'pino'
import postgres from 'postgres'
import { buildApp, loggerOptions } from '../../src/app.js'
import { legacyKeyId } from '../../src/auth/api-keys.js'
import { loadConfig } from '../../src/config.js'
import { projectRoot } from '../../src/paths.js'
import { createClient } from '../../src/db/client.js'
import { createTestDatabase } from '../helpers/database.js'
import { freePort } from '../helpers/server-process.js'
import { hogUntilOverloaded } from '../helpers/event-loop-hog.js'
import { waitFor } from '../helpers/wait.js'

const KEY = 'ops-key-1'
const OTHER_KEY = 'ops-key-2'
const version = JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')).version as string
const contractVersion = JSON.parse(readFileSync(path.join(projectRoot, 'generated/openapi.json'), 'utf8')).info
  .version as string

/** The value of one sample line of the Prometheus text, or undefined when absent. */
function sample(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ''} `))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1))
}

t.test('request log lines and /metrics after a walk through successes and errors', async (t) => {
  const lines: Record<string, unknown>[] = []
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(JSON.parse(String(chunk)))
      done()
    },
  })
  const db = await createTestDatabase(t)
  const config = loadConfig({
    API_KEYS: `${KEY},${OTHER_KEY}`,
    LOG_LEVEL: 'info',
    RATE_LIMIT_MAX: '5',
    LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0',
  })
  const app = await buildApp({
    config,
    sql: db.sql,
    logger: pino(loggerOptions(config, false) as never, sink) as never,
  })
  t.teardown(() => app.close())
  const send = (method: string, url: string, options: { key?: string; idem?: string; body?: unknown } = {}) =>
    app.inject({
      method: method as never,
      url,
      headers: {
        'x-api-key': options.key ?? KEY,
        'content-type': 'application/json',
        ...(options.idem ? { 'idempotency-key': options.idem } : {}),
      },
      payload: options.body as never,
    })

  const system = randomUUID()
  const user = { system_user_id: 'ops-1', system_uuid: system, full_name: 'Ops' }
  t.equal((await send('POST', '/api/v1/user', { idem: 'u1', body: user })).statusCode, 201)
  const replay = await send('POST', '/api/v1/user', { idem: 'u1', body: user })
  t.equal(replay.headers['idempotent-replayed'], 'true')
  t.equal((await send('POST', '/api/v1/user', { idem: 'u1', body: { ...user, full_name: 'Other' } })).statusCode, 409)
  t.equal((await send('GET', `/api/v1/user/${system}/nobody`)).statusCode, 404)
  t.equal((await send('POST', '/api/v1/user', { idem: 'u2', body: { ...user, full_name: '' } })).statusCode, 422)
  // The other key has a window of its own: 5 pass, the 6th is refused.
  const statuses: number[] = []
  for (let i = 0; i < 6; i++)
    statuses.push((await send('GET', `/api/v1/user/${system}/ops-1`, { key: OTHER_KEY })).statusCode)
  t.same(statuses, [200, 200, 200, 200, 200, 429])

  const requestLines = lines.filter((l) => l.msg === 'request completed')
  t.equal(requestLines.length, 11, 'one line per request')
  for (const line of requestLines) {
    t.notMatch(String(line.route), /:/, `OpenAPI route form: ${line.route}`)
    t.match(line.key_id, /^key-[0-9a-f]{12}$/, 'the API key id, never the key')
    if ((line.status as number) >= 400) t.match(line.code, /^[A-Z]+_\d{3}$/, `status ${line.status} carries its code`)
    else t.equal(line.code, undefined, 'a success carries no code')
  }
  const byStatus = (status: number) => requestLines.find((l) => l.status === status)!
  t.match(byStatus(404), {
    route: '/api/v1/user/{system_uuid}/{system_user_id}',
    code: 'USER_404',
    error_key: 'USER_NOT_FOUND',
  })
  t.match(byStatus(409), {
    route: '/api/v1/user',
    code: 'COMMON_409',
    error_key: 'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD',
  })
  t.match(byStatus(422), { code: 'USER_004', error_key: 'USER_CREATE_FULL_NAME_TOO_SHORT' })
  t.match(byStatus(429), { code: 'COMMON_429', key_id: legacyKeyId(OTHER_KEY) })
  t.notOk(JSON.stringify(lines).includes(KEY), 'no API key in any line')

  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body
  t.equal(
    sample(
      text,
      'study_service_build_info',
      `version="${version}",contract_version="${contractVersion}",node_version="${process.version}",commit=""`,
    ),
    1,
  )
  t.equal(sample(text, 'http_errors_total', 'status="404",code="USER_404",key="USER_NOT_FOUND"'), 1)
  t.equal(sample(text, 'http_errors_total', 'status="422",code="USER_004",key="USER_CREATE_FULL_NAME_TOO_SHORT"'), 1)
  t.equal(sample(text, 'http_errors_total', 'status="429",code="COMMON_429",key="SECURITY_RATE_LIMIT_EXCEEDED"'), 1)
  t.equal(sample(text, 'idempotency_replays_total', 'path_template="/api/v1/user"'), 1)
  t.equal(sample(text, 'idempotency_conflicts_total', 'key="IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD"'), 1)
  t.equal(sample(text, 'http_rate_limited_total', 'path_template="/api/v1/user/{system_uuid}/{system_user_id}"'), 1)
  t.match(text, /# TYPE http_load_shed_total counter/)
  t.notMatch(text, /^http_load_shed_total\{/m, 'nothing was shed')
  t.equal(sample(text, 'db_up'), 1)
  t.equal(sample(text, 'db_pool_max_connections'), 10)
  t.equal(sample(text, 'db_pool_reserved_connections'), 0)
  t.equal(sample(text, 'db_pool_reserve_waiting'), 0)
  t.equal(sample(text, 'db_operations_in_flight'), 0)
})

t.test('pool gauges count held transactions and operations waiting on PostgreSQL', async (t) => {
  const db = await createTestDatabase(t)
  const config = loadConfig({ API_KEYS: KEY, LOG_LEVEL: 'silent', LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0' })
  const app = await buildApp({ config, sql: db.sql, logger: false })
  t.teardown(() => app.close())
  const scrape = async () => (await app.inject({ method: 'GET', url: '/metrics' })).body

  const inside = await app.db.transaction(async () => sample(await scrape(), 'db_pool_reserved_connections'))
  t.equal(inside, 1, 'a transaction is counted while it holds its connection')
  t.equal(sample(await scrape(), 'db_pool_reserved_connections'), 0, 'and no longer once it has ended')
  await app.db
    .transaction(async () => {
      throw new Error('rolled back')
    })
    .catch(() => {})
  t.equal(sample(await scrape(), 'db_pool_reserved_connections'), 0, 'nor after a rollback')
  t.equal(sample(await scrape(), 'db_pool_reserve_waiting'), 0)

  // A table lock held elsewhere keeps one read waiting on PostgreSQL.
  const blocker = postgres(db.url, { max: 1, onnotice: () => {} })
  t.teardown(() => blocker.end())
  const lock = await blocker.reserve()
  await lock`begin`
  await lock`lock table users in access exclusive mode`
  const pending = app.inject({ method: 'GET', url: `/api/v1/user/${randomUUID()}/x`, headers: { 'x-api-key': KEY } })
  let inFlight: number | undefined
  for (let i = 0; i < 50 && !inFlight; i++) {
    await sleep(20)
    inFlight = sample(await scrape(), 'db_operations_in_flight')
  }
  t.equal(inFlight, 1, 'the blocked read is in flight')
  await lock`commit`
  lock.release()
  t.equal((await pending).statusCode, 404)
  t.equal(sample(await scrape(), 'db_operations_in_flight'), 0)
})

t.test('load shedding is counted by route; /ready turning not_ready is not', async (t) => {
  const db = await createTestDatabase(t)
  const config = loadConfig({ API_KEYS: KEY, LOG_LEVEL: 'silent', LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '50' })
  const app = await buildApp({ config, sql: db.sql, logger: false })
  t.teardown(() => app.close())
  await app.ready()
  const get = (url: string) => app.inject({ method: 'GET', url, headers: { 'x-api-key': KEY } })
  // Past a late start-up sample (samples are one a second): /ready, which is never counted as
  // shed, says the loop is on time.
  await waitFor('the start-up samples to show the loop on time', async () => (await get('/ready')).statusCode === 200, {
    everyMs: 50,
  })
  // Keep the event loop late (200 ms of synchronous work at a time) until a sample shows it.
  const stopHogging = await hogUntilOverloaded(app)
  const shed = await get(`/api/v1/user/${randomUUID()}/nobody`)
  const ready = await get('/ready')
  stopHogging()
  t.equal(shed.statusCode, 503)
  t.equal(ready.statusCode, 503)
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body
  t.equal(sample(text, 'http_load_shed_total', 'path_template="/api/v1/user/{system_uuid}/{system_user_id}"'), 1)
  t.notMatch(text, /^http_load_shed_total\{path_template="\/ready"\}/m, "/ready's 503 is a probe answer")
  t.equal(sample(text, 'http_errors_total', 'status="503",code="COMMON_503",key="SERVICE_OVERLOADED"'), 1)
})

t.test('db_up is 0 when PostgreSQL does not answer', async (t) => {
  // Nothing listens on this port: every connection attempt is refused.
  const sql = createClient(`postgres://postgres@127.0.0.1:${await freePort()}/none`, { max: 1, connectTimeout: 1 })
  t.teardown(() => sql.end({ timeout: 1 }))
  const app = await buildApp({
    config: loadConfig({ API_KEYS: KEY, LOG_LEVEL: 'silent', LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0' }),
    sql,
    logger: false,
  })
  t.teardown(() => app.close())
  t.equal(sample((await app.inject({ method: 'GET', url: '/metrics' })).body, 'db_up'), 0)
})

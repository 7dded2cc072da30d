// API keys, Authorization and cookies never appear in a log line; errors log no stack or SQL.
import t from 'tap'
import { Writable } from 'node:stream'
import { randomUUID } from 'node:crypto'
import pino from 'pino'
import { buildApp, loggerOptions } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { createClient } from '../../src/db/client.js'
import { createTestDatabase } from '../helpers/database.js'
import { NO_LOAD_SHEDDING } from '../helpers/app.js'

const SECRET = 'super-secret-key-0123456789'
const lines: string[] = []
const sink = new Writable({
  write(chunk, _enc, done) {
    lines.push(String(chunk))
    done()
  },
})

t.test('secrets are redacted from every log line', async (t) => {
  const db = await createTestDatabase(t)
  const config = loadConfig({ API_KEYS: SECRET, LOG_LEVEL: 'trace', ...NO_LOAD_SHEDDING })
  const logger = pino(loggerOptions(config) as never, sink)
  const app = await buildApp({ config, sql: db.sql, logger: logger as never })
  t.teardown(() => app.close())
  const headers = {
    'x-api-key': SECRET,
    authorization: `Bearer ${SECRET}`,
    cookie: `session=${SECRET}`,
    'content-type': 'application/json',
  }
  await app.inject({
    method: 'POST',
    url: '/api/v1/user',
    headers: { ...headers, 'idempotency-key': 'k1' },
    payload: { system_user_id: 's', system_uuid: randomUUID(), full_name: SECRET },
  })
  await app.inject({ method: 'GET', url: `/api/v1/user/${randomUUID()}/x`, headers })
  await app.inject({ method: 'GET', url: '/api/v1/user/x/y', headers: { 'x-api-key': `wrong-${SECRET}` } })
  // A request that reaches every logger: request logging at trace includes req objects.
  logger.info({ req: { headers } }, 'explicit request log')
  t.ok(lines.length >= 4, `captured ${lines.length} lines`)
  for (const line of lines) t.notMatch(line, SECRET, `no secret in: ${line.slice(0, 120)}`)
})

t.test('an unexpected database error is logged without stack, SQL or parameters', async (t) => {
  lines.length = 0
  const db = await createTestDatabase(t)
  const config = loadConfig({ API_KEYS: 'k', LOG_LEVEL: 'info', ...NO_LOAD_SHEDDING })
  const app = await buildApp({ config, sql: db.sql, logger: pino(loggerOptions(config) as never, sink) as never })
  t.teardown(() => app.close())
  await db.sql`drop table conspectuses cascade`
  const owner = { system_user_id: 'broken', system_uuid: randomUUID() }
  await app.inject({
    method: 'POST',
    url: '/api/v1/user',
    headers: { 'x-api-key': 'k', 'idempotency-key': 'u' },
    payload: { ...owner, full_name: 'B' },
  })
  const res = await app.inject({
    method: 'GET',
    url: `/api/v1/conspectuses/due?system_user_id=broken&system_uuid=${owner.system_uuid}`,
    headers: { 'x-api-key': 'k' },
  })
  t.equal(res.statusCode, 500)
  t.same(res.json(), {
    code: 'COMMON_500',
    key: 'INTERNAL_ERROR',
    message: 'An unexpected error occurred.',
    source: 'internal',
  })
  const errorLines = lines.filter((l) => l.includes('unexpected error'))
  t.equal(errorLines.length, 1)
  t.notMatch(errorLines[0]!, /select|from conspectuses|"stack"|at \w+ \(|broken/i)
  t.match(errorLines[0]!, /"code":"42P01"/, 'the SQLSTATE is kept for operators')
})

// keep createClient referenced for the type of the pool used above
void createClient

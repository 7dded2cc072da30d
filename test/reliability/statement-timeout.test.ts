// A statement the database cannot finish within its statement_timeout is the database being too
// slow, not a bug: 503 COMMON_503 with Retry-After, never 500.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import postgres from 'postgres'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { createTestDatabase } from '../helpers/database.js'
import { NO_LOAD_SHEDDING } from '../helpers/app.js'

t.test('a read blocked past statement_timeout answers 503', async (t) => {
  const db = await createTestDatabase(t)
  const slow = postgres(db.url, { max: 2, onnotice: () => {}, connection: { statement_timeout: 300 } })
  t.teardown(() => slow.end({ timeout: 1 }))
  const app = await buildApp({
    config: loadConfig({ API_KEYS: 'k', LOG_LEVEL: 'silent', ...NO_LOAD_SHEDDING }),
    sql: slow as never,
    logger: false,
  })
  t.teardown(() => app.close())
  const url = `/api/v1/user/${randomUUID()}/someone`

  // Another session holds the users table locked, so the read waits until it is cancelled.
  const locker = postgres(db.url, { max: 1, onnotice: () => {} })
  t.teardown(() => locker.end({ timeout: 1 }))
  let release!: () => void
  const released = new Promise<void>((r) => (release = r))
  let locked!: () => void
  const isLocked = new Promise<void>((r) => (locked = r))
  const holding = locker.begin(async (tx) => {
    await tx`lock table users in access exclusive mode`
    locked()
    await released
  })
  await isLocked

  const res = await app.inject({ method: 'GET', url, headers: { 'x-api-key': 'k' } })
  release()
  await holding
  t.equal(res.statusCode, 503)
  t.same(res.json(), {
    code: 'COMMON_503',
    key: 'SERVICE_UNAVAILABLE',
    message: 'The service is temporarily unavailable; retry later.',
    source: 'internal',
  })
  t.ok(res.headers['retry-after'], 'carries Retry-After')
  t.notMatch(res.body, /statement|cancel|lock/i, 'no SQL or database message in the body')

  const after = await app.inject({ method: 'GET', url, headers: { 'x-api-key': 'k' } })
  t.equal(after.statusCode, 404, 'the same read answers normally once the lock is gone')
})

// Overload: business routes shed with 503 + Retry-After, /live keeps answering, /ready turns
// not_ready, and everything recovers once the event loop is on time again. /ready's database
// check is shared by the probes of one second.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import type { Sql } from '../../src/db/client.js'
import { createTestDatabase } from '../helpers/database.js'
import { hogUntilOverloaded } from '../helpers/event-loop-hog.js'
import { waitFor } from '../helpers/wait.js'

t.test('an overloaded process sheds business requests, keeps /live, fails /ready, and recovers', async (t) => {
  const db = await createTestDatabase(t)
  const config = loadConfig({
    API_KEYS: 'k',
    LOG_LEVEL: 'silent',
    LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '50',
    LOAD_SHED_RETRY_AFTER_SECONDS: '3',
  })
  const app = await buildApp({ config, sql: db.sql, logger: false })
  t.teardown(() => app.close())
  await app.ready()
  const userUrl = `/api/v1/user/${randomUUID()}/nobody`
  const get = (url: string) => app.inject({ method: 'GET', url, headers: { 'x-api-key': 'k' } })
  // Start-up (building the app, a busy machine) may leave a late sample: idle, the route answers
  // once the samples (one per second) show the loop on time.
  await waitFor('idle: the route to answer', async () => (await get(userUrl)).statusCode === 404, { everyMs: 50 })
  t.pass('idle: the route answers')

  // Keep the event loop late (200 ms of synchronous work at a time) until a sample shows it.
  const stopHogging = await hogUntilOverloaded(app)
  const shed = await get(userUrl)
  const live = await get('/live')
  const ready = await get('/ready')
  stopHogging()

  t.equal(shed.statusCode, 503)
  t.same(shed.json(), {
    code: 'COMMON_503',
    key: 'SERVICE_OVERLOADED',
    message: 'The service is overloaded; retry after the number of seconds in Retry-After.',
    source: 'internal',
  })
  t.equal(shed.headers['retry-after'], '3')
  t.ok(shed.headers['x-ratelimit-limit'], 'the rate limiter ran first')
  t.equal(live.statusCode, 200, '/live keeps answering')
  t.equal(ready.statusCode, 503, '/ready tells balancers to stop sending')
  t.equal(ready.json().checks.load, 'overloaded')

  await waitFor(
    'the route to answer again once the loop is on time',
    async () => (await get(userUrl)).statusCode === 404,
    {
      everyMs: 50,
    },
  )
  t.equal((await get('/ready')).statusCode, 200)
})

t.test('a flood of /ready probes is one database check per second', async (t) => {
  const db = await createTestDatabase(t)
  let checks = 0
  // Counts the readiness query on its way to the real database.
  const counting = new Proxy(db.sql, {
    apply(target, thisArg, args: unknown[]) {
      if (Array.isArray(args[0]) && (args[0] as string[]).join('?').trim() === 'select 1') checks++
      return Reflect.apply(target, thisArg, args)
    },
  }) as Sql
  const app = await buildApp({
    config: loadConfig({ API_KEYS: 'k', LOG_LEVEL: 'silent', LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0' }),
    sql: counting,
    logger: false,
  })
  t.teardown(() => app.close())
  const flood = await Promise.all(Array.from({ length: 200 }, () => app.inject({ method: 'GET', url: '/ready' })))
  t.ok(
    flood.every((r) => r.statusCode === 200 && r.json().checks.database === 'ok'),
    'every probe answered ready',
  )
  t.equal(checks, 1, 'one query served them all')
  // Probes until one checks again (the next second); each answered ready, one query for it.
  await waitFor(
    'a later probe to check the database again',
    async () => {
      t.equal((await app.inject({ method: 'GET', url: '/ready' })).statusCode, 200)
      return checks > 1
    },
    { everyMs: 100 },
  )
  t.equal(checks, 2, 'a probe after the second checks again, once')
})

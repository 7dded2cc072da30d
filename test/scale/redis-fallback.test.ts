// The real app with REDIS_URL pointing at a Redis that is not there (a replica starting while
// Redis is down): requests neither fail nor wait, the local window limits, every local
// decision is counted in rate_limit_store_fallback_total and the outage is logged once.
import t from 'tap'
import { Writable } from 'node:stream'
import { randomUUID } from 'node:crypto'
import pino from 'pino'
import { buildApp, loggerOptions } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { createTestDatabase } from '../helpers/database.js'
import { freePort } from '../helpers/server-process.js'

t.test('Redis unreachable from the start: local window, metric, one log line', async (t) => {
  const db = await createTestDatabase(t)
  const lines: string[] = []
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk))
      done()
    },
  })
  const config = loadConfig({
    API_KEYS: 'k',
    LOG_LEVEL: 'info',
    RATE_LIMIT_MAX: '3',
    REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
  })
  const app = await buildApp({ config, sql: db.sql, logger: pino(loggerOptions(config) as never, sink) as never })
  t.teardown(() => app.close())
  const url = `/api/v1/user/${randomUUID()}/nobody`
  const answers = []
  for (let i = 0; i < 5; i++) answers.push(await app.inject({ url, headers: { 'x-api-key': 'k' } }))
  t.same(
    answers.map((r) => r.statusCode),
    [404, 404, 404, 429, 429],
    'the local window limits; nothing fails',
  )
  t.same(
    answers.map((r) => r.headers.ratelimit?.toString().split(';')[1]),
    ['r=2', 'r=1', 'r=0', 'r=0', 'r=0'],
  )
  const metrics = (await app.inject({ url: '/metrics' })).body
  t.match(metrics, /^rate_limit_store_fallback_total 5$/m, 'every local decision is counted')
  const outage = lines.filter((l) => l.includes('Redis unavailable'))
  t.equal(outage.length, 1, 'logged once (at most once per 10 s)')
  t.match(JSON.parse(outage[0]!), { level: 40, reason: String })
})

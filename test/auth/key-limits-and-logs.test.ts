// A key's own rate_limit replaces the default for that key only, and every request's log line
// names the key id (never the secret).
import t from 'tap'
import { Writable } from 'node:stream'
import { randomUUID } from 'node:crypto'
import pino from 'pino'
import { buildApp, loggerOptions } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { createTestDatabase } from '../helpers/database.js'
import { writeKeyFile } from '../helpers/keys.js'
import { NO_LOAD_SHEDDING } from '../helpers/app.js'

t.test('per-key rate limit and key_id on each log line', async (t) => {
  const lines: string[] = []
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk))
      done()
    },
  })
  const db = await createTestDatabase(t)
  const file = await writeKeyFile(t, [
    { id: 'tight', secret: 'ssk_tight_secret', rate_limit: { max: 2, window_ms: 60_000 } },
    { id: 'roomy', secret: 'ssk_roomy_secret' },
  ])
  const config = loadConfig({ API_KEYS_FILE: file, LOG_LEVEL: 'info', RATE_LIMIT_MAX: '50', ...NO_LOAD_SHEDDING })
  const app = await buildApp({ config, sql: db.sql, logger: pino(loggerOptions(config) as never, sink) as never })
  t.teardown(() => app.close())
  const get = (key: string) =>
    app.inject({ method: 'GET', url: `/api/v1/user/${randomUUID()}/x`, headers: { 'x-api-key': key } })

  const tight = [await get('ssk_tight_secret'), await get('ssk_tight_secret'), await get('ssk_tight_secret')]
  t.same(
    tight.map((r) => r.statusCode),
    [404, 404, 429],
    "the key's own max of 2",
  )
  t.equal(tight[0]!.headers['x-ratelimit-limit'], '2')
  t.equal(tight[1]!.headers['ratelimit-policy'], '"default";q=2;w=60', "the policy field names the key's own quota")
  const roomy = await get('ssk_roomy_secret')
  t.equal(roomy.statusCode, 404)
  t.equal(roomy.headers['x-ratelimit-limit'], '50', 'the default for a key without rate_limit')
  t.equal(roomy.headers['ratelimit-policy'], '"default";q=50;w=60', 'and its policy field')
  await get('ssk_not_a_key')

  const requests = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request completed')
  t.same(
    requests.map((l) => l.key_id),
    ['tight', 'tight', 'tight', 'roomy', null],
  )
  for (const line of lines) t.notMatch(line, /ssk_/, 'no secret in a log line')
})

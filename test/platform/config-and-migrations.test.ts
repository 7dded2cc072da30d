// Start-up: configuration checks and migrations that are safe with several replicas.
import t from 'tap'
import { ConfigError, DEV_API_KEY, loadConfig } from '../../src/config.js'
import { migrate } from '../../src/db/migrate.js'
import { createClient } from '../../src/db/client.js'
import { createTestDatabase } from '../helpers/database.js'

t.test('defaults: dev profile with the development key', async (t) => {
  const config = loadConfig({})
  t.match(config, { port: 3000, appEnv: 'dev', apiKeys: [DEV_API_KEY], rateLimitMax: 1000, rateLimitWindowMs: 60000, bodyLimitBytes: 1048576, idempotencyTtlHours: 24 })
})

t.test('bad values stop the start with a one-line message', async (t) => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ APP_ENV: 'staging' }, /APP_ENV must be one of dev, qa, prod/],
    [{ APP_ENV: 'prod' }, /API_KEYS is required when APP_ENV=prod/],
    [{ PORT: 'abc' }, /PORT must be an integer/],
    [{ RATE_LIMIT_MAX: '0' }, /RATE_LIMIT_MAX must be an integer from 1/],
    [{ BODY_LIMIT_BYTES: '1.5' }, /BODY_LIMIT_BYTES/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL must be one of/],
    [{ DATABASE_URL: 'mysql://x' }, /DATABASE_URL must be a postgres/],
  ]
  for (const [env, message] of cases) {
    t.throws(() => loadConfig(env), { constructor: ConfigError, message }, JSON.stringify(env))
  }
  t.same(loadConfig({ APP_ENV: 'prod', API_KEYS: ' a , b ,' }).apiKeys, ['a', 'b'])
})

t.test('replicas migrating at once apply every file exactly once', async (t) => {
  const db = await createTestDatabase(t)
  await db.sql`drop schema public cascade`
  await db.sql`create schema public`
  const replicas = [createClient(db.url, { max: 1 }), createClient(db.url, { max: 1 }), createClient(db.url, { max: 1 })]
  t.teardown(() => Promise.all(replicas.map((s) => s.end())))
  const applied = await Promise.all(replicas.map((sql) => migrate(sql)))
  const all = applied.flat()
  t.same(new Set(all).size, all.length, 'no file applied twice')
  t.ok(all.includes('0001_users.sql'))
  const rows = await db.sql<{ name: string }[]>`select name from schema_migrations order by name`
  t.same(rows.map((r) => r.name), [...all].sort())
  t.same(await migrate(db.sql), [], 'a later start has nothing to apply')
})

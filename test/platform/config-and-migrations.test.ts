// Start-up: configuration checks and migrations that are safe with several replicas.
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import t, { type Test } from 'tap'
import { legacyKeyId } from '../../src/auth/api-keys.js'
import { buildApp } from '../../src/app.js'
import { ConfigError, DEV_API_KEY, loadConfig } from '../../src/config.js'
import { migrate } from '../../src/db/migrate.js'
import { createClient } from '../../src/db/client.js'
import { requestHash } from '../../src/idempotency/request-hash.js'
import { projectRoot } from '../../src/paths.js'
import { createTestDatabase } from '../helpers/database.js'
import { startServer } from '../helpers/server-process.js'
import { NO_LOAD_SHEDDING } from '../helpers/app.js'

t.test('defaults: dev profile with the development key', async (t) => {
  const config = loadConfig({})
  t.match(config, {
    port: 3000,
    appEnv: 'dev',
    apiKeys: [DEV_API_KEY],
    rateLimitMax: 1000,
    rateLimitWindowMs: 60000,
    bodyLimitBytes: 1048576,
    idempotencyTtlHours: 24,
    databasePoolMax: 10,
  })
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
    [{ DATABASE_POOL_MAX: '0' }, /DATABASE_POOL_MAX must be an integer from 1/],
  ]
  for (const [env, message] of cases) {
    t.throws(() => loadConfig(env), { constructor: ConfigError, message }, JSON.stringify(env))
  }
  t.same(loadConfig({ APP_ENV: 'prod', API_KEYS: ' a , b ,', DATABASE_URL: 'postgres://db/study' }).apiKeys, ['a', 'b'])
})

t.test('replicas migrating at once apply every file exactly once', async (t) => {
  const db = await createTestDatabase(t)
  await db.sql`drop schema public cascade`
  await db.sql`create schema public`
  const replicas = [
    createClient(db.url, { max: 1 }),
    createClient(db.url, { max: 1 }),
    createClient(db.url, { max: 1 }),
  ]
  t.teardown(() => Promise.all(replicas.map((s) => s.end())))
  const applied = await Promise.all(replicas.map((sql) => migrate(sql)))
  const all = applied.flat()
  t.same(new Set(all).size, all.length, 'no file applied twice')
  t.ok(all.includes('0001_users.sql'))
  const rows = await db.sql<{ name: string }[]>`select name from schema_migrations order by name`
  t.same(
    rows.map((r) => r.name),
    [...all].sort(),
  )
  t.same(await migrate(db.sql), [], 'a later start has nothing to apply')
})

/** A fresh database migrated with only the files named before `next` (e.g. '0006'). */
async function databaseBefore(t: Test, next: string) {
  const db = await createTestDatabase(t)
  await db.sql`drop schema public cascade`
  await db.sql`create schema public`
  const all = path.join(projectRoot, 'db/migrations')
  const earlier = await mkdtemp(path.join(os.tmpdir(), 'migrations-'))
  t.teardown(() => rm(earlier, { recursive: true, force: true }))
  for (const file of (await readdir(all)).filter((f) => f.endsWith('.sql') && f < next))
    await copyFile(path.join(all, file), path.join(earlier, file))
  await migrate(db.sql, earlier)
  return db
}

t.test('answers stored as jsonb before migration 0006 are kept by it as JSON text, which replays', async (t) => {
  const db = await databaseBefore(t, '0006')
  const user = {
    system_user_id: 'before-0006',
    system_uuid: '5b0d7a0e-6c1f-4c39-9a51-0f3c3f1b2a11',
    full_name: 'Stored Before',
  }
  const config = loadConfig({ API_KEYS: 'k', LOG_LEVEL: 'silent', ...NO_LOAD_SHEDDING })
  // The first answer, as the service of 0005 stored it (jsonb), with the body's canonical hash.
  const answer = {
    ...user,
    client_uuid: 'c5a1a1e2-3d4b-4c5d-8e6f-7a8b9c0d1e2f',
    username: null,
    timezone: 'UTC',
    is_row_invalid: 0,
    invalidation_reason_uuid: null,
    created_at: '2026-11-22T10:00:00.000Z',
    updated_at: '2026-11-22T10:00:00.000Z',
  }
  await db.sql`insert into idempotency_records (scope, idempotency_key, request_hash, status_code, response_body, expires_at)
               values ('/api/v1/user', 'old-key', ${requestHash(user)}, 201, ${db.sql.json(answer)}, now() + interval '1 hour')`

  t.equal((await migrate(db.sql))[0], '0006_idempotency_answer_text.sql')
  const [stored] = await db.sql<
    { response_body: string }[]
  >`select response_body from idempotency_records where idempotency_key = 'old-key'`
  t.same(JSON.parse(stored!.response_body), answer, 'the answer is text now, the same JSON')
  // Records of that time had no key id (0009) and expired a day later; keyed as records are now, it replays.
  await db.sql`update idempotency_records set key_id = ${legacyKeyId('k')} where idempotency_key = 'old-key'`
  const app = await buildApp({ config, sql: db.sql, logger: false })
  t.teardown(() => app.close())
  const replay = await app.inject({
    method: 'POST',
    url: '/api/v1/user',
    payload: user,
    headers: { 'x-api-key': 'k', 'idempotency-key': 'old-key' },
  })
  t.equal(replay.statusCode, 201)
  t.equal(replay.headers['idempotent-replayed'], 'true')
  t.same(replay.json(), answer)
})

t.test('telemetry events stored before migration 0007 are rolled up by it and counted after it', async (t) => {
  const db = await databaseBefore(t, '0007')
  const now = Date.parse('2026-11-22T12:00:00Z')
  await db.sql`insert into docs_search_events (event, emitted_at_ms, query_id, results_count, time_to_success_ms) values
    ('search_query', ${now - 120_000}, 'q1', 0, 0), ('search_result_click', ${now - 60_000}, 'q1', 0, 900),
    ('search_query', ${now - 30_000}, 'q2', 3, 0), ('search_query', ${now - 20_000}, '', 0, 0)`
  t.same(
    (await migrate(db.sql)).slice(0, 2),
    ['0007_docs_search_query_rollup.sql', '0008_docs_search_kpi_buckets.sql'],
    '0007 applies first, then the later ones',
  )
  const rollup =
    await db.sql`select query_id, first_ms::float8, last_ms::float8, queries, zero_result_queries, has_click, first_success_ms
                              from docs_search_queries order by query_id`
  t.same(rollup, [
    {
      query_id: 'q1',
      first_ms: now - 120_000,
      last_ms: now - 60_000,
      queries: 1,
      zero_result_queries: 1,
      has_click: true,
      first_success_ms: 900,
    },
    {
      query_id: 'q2',
      first_ms: now - 30_000,
      last_ms: now - 30_000,
      queries: 1,
      zero_result_queries: 0,
      has_click: false,
      first_success_ms: null,
    },
  ])
  const app = await buildApp({
    config: loadConfig({ API_KEYS: 'k', LOG_LEVEL: 'silent', ...NO_LOAD_SHEDDING }),
    sql: db.sql,
    logger: false,
    now: () => new Date(now),
  })
  t.teardown(() => app.close())
  const res = await app.inject({
    method: 'GET',
    url: '/api/v1/telemetry/docs-search/metrics?window_minutes=60',
    headers: { 'x-api-key': 'k' },
  })
  t.match(res.json(), {
    total_queries: 3,
    zero_result_queries: 2,
    queries_with_click: 1,
    median_time_to_first_success_ms: 900,
  })
})

t.test('DATABASE_POOL_MAX bounds the connections a replica opens to PostgreSQL', async (t) => {
  const db = await createTestDatabase(t)
  const server = await startServer(t, { DATABASE_URL: db.url, DATABASE_POOL_MAX: '2', RATE_LIMIT_MAX: '100000' })
  const owner = { system_user_id: 'pool', system_uuid: '3fa85f64-5717-4562-b3fc-2c963f66afa6' }
  const headers = { 'x-api-key': 'k', 'content-type': 'application/json' }
  const writes = Array.from({ length: 30 }, (_, i) =>
    fetch(`${server.base}/api/v1/user`, {
      method: 'POST',
      headers: { ...headers, 'idempotency-key': `pool-${i}` },
      body: JSON.stringify({ ...owner, system_user_id: `pool-${i}`, full_name: 'P' }),
    }).then((r) => r.status),
  )
  t.same([...new Set(await Promise.all(writes))], [201], 'thirty concurrent writes all succeed')
  const [open] = await db.sql<{ n: number }[]>`
    select count(*)::int as n from pg_stat_activity
    where datname = ${db.name} and application_name = 'study-service' and pid <> pg_backend_pid()`
  t.ok(open!.n >= 1 && open!.n <= 2, `the replica holds ${open!.n} connections, at most 2`)
  const [listening] = await db.sql<{ n: number }[]>`
    select count(*)::int as n from pg_stat_activity
    where datname = ${db.name} and application_name = 'study-service-listener'`
  t.equal(listening!.n, 1, 'and one more that listens for key changes')
})

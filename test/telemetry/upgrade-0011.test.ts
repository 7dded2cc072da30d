// Migration 0011 (partitioned docs_search_events) during a rolling upgrade: a replica of the
// previous release keeps inserting and reading KPIs, over its own prepared statements, before,
// during and after the migration; stored events stay where they are (the old table becomes a
// partition) and every KPI answers as the definitions over the events.
import t from 'tap'
import { buildApp } from '../../src/app.js'
import { createClient } from '../../src/db/client.js'
import { loadConfig } from '../../src/config.js'
import { migrate } from '../../src/db/migrate.js'
import { createTelemetryRepository } from '../../src/repositories/telemetry.js'
import { NO_LOAD_SHEDDING } from '../helpers/app.js'
import { createPartlyMigratedDatabase } from '../helpers/database.js'
import { REFERENCE_KPIS } from '../helpers/reference-kpis.js'
import { waitFor } from '../helpers/wait.js'

const DAY = 86_400_000
const now = Date.now()

t.test('the previous release ingests and reads KPIs before, during and after 0011', async (t) => {
  // Every file but 0011. The later ones (0012-0014, the minute buckets, which 0011 does not touch)
  // are applied ahead so that this repository's KPI query, which reads them, can stand in for the
  // old replica's.
  const db = await createPartlyMigratedDatabase(t, (f) => !f.startsWith('0011_'))

  // The old replica: its own pool, prepared statements. The INSERT and the KPI query of this
  // repository are the previous release's, unchanged (same table name and columns).
  const oldPool = createClient(db.url, { max: 2 })
  t.teardown(() => oldPool.end())
  const old = createTelemetryRepository(oldPool)
  let sent = 0
  const batch = (n: number, spreadMs: number, tag: string) =>
    Array.from({ length: n }, (_, i) => ({
      event: i % 3 === 0 ? 'search_result_click' : 'search_query',
      emitted_at_ms: now - ((i * 7_919_993) % spreadMs),
      query_id: i % 7 === 0 ? '' : `${tag}-q${i % 40}`,
      session_id: `${tag}-s${i % 4}`,
      results_count: i % 3,
      time_to_success_ms: i % 5 === 0 ? 300 + i : 0,
    }))
  const append = async (events: ReturnType<typeof batch>) => {
    sent += await old.append(events)
  }
  await append(batch(400, 9 * DAY, 'before'))
  // A client with its clock ahead: dated after tomorrow, it leaves the old table in 0011.
  await append([
    {
      event: 'search_query',
      emitted_at_ms: now + 3 * DAY,
      query_id: 'ahead',
      session_id: 'ahead',
      results_count: 0,
      time_to_success_ms: 0,
    },
  ])
  const kpisBefore = await old.metrics(now - 7 * DAY, now)

  // While the migration runs, the old replica keeps ingesting and reading.
  let running = true
  const answers: string[] = []
  const traffic = (async () => {
    for (let i = 0; running; i++) {
      await append(batch(50, DAY, `during${i}`))
      await old.metrics(now - 60 * 60_000, now)
      answers.push('ok')
    }
  })()
  await waitFor('old-replica traffic before the migration', () => answers.length > 0)
  const applied = await migrate(db.sql)
  t.same(applied, ['0011_docs_search_events_partitioned.sql'])
  const roundsAtMigration = answers.length
  await waitFor('old-replica traffic after the migration', () => answers.length > roundsAtMigration + 1)
  running = false
  await traffic
  t.ok(answers.length > 0, `${answers.length} rounds of old-replica traffic across the migration`)

  // After it, on the same prepared statements.
  await append(batch(100, DAY, 'after'))
  const [stored] = await db.sql`select count(*)::int as n from docs_search_events`
  t.equal(stored!.n, sent, 'every event the old replica sent is stored')
  const [places] =
    await db.sql`select count(*) filter (where tableoid = 'docs_search_events_legacy'::regclass)::int as legacy,
                                       count(*) filter (where query_id = 'ahead' and tableoid = 'docs_search_events_default'::regclass)::int as ahead
                                from docs_search_events`
  t.ok(places!.legacy >= 400, 'the stored events stayed in the old table, now a partition')
  t.equal(places!.ahead, 1, 'the event dated after tomorrow moved out of it')

  for (const [from, to] of [
    [now - 7 * DAY, now],
    [now - DAY, now],
    [now - 60 * 60_000, now],
  ] as const) {
    const [expected] = await db.sql.unsafe(REFERENCE_KPIS, [from, to])
    const { zero_result_rate, query_ctr, ...counts } = await old.metrics(from, to)
    t.same(counts, expected, `old KPI query, window of ${(to - from) / 60_000} min, as the definitions`)
  }
  t.not(kpisBefore.total_queries, 0)

  // The new release starts: partitions ahead, the old table's session index, erasure over it.
  const app = await buildApp({
    config: loadConfig({ API_KEYS: 'k', LOG_LEVEL: 'silent', ...NO_LOAD_SHEDDING }),
    sql: db.sql,
    logger: false,
  })
  t.teardown(() => app.close())
  const [index] =
    await db.sql`select count(*)::int as n from pg_indexes where indexname = 'docs_search_events_legacy_session'`
  t.equal(index!.n, 1, 'the old table got its session index (built concurrently)')
  const erased = await app.inject({
    method: 'DELETE',
    url: '/api/v1/telemetry/docs-search/sessions/before-s1',
    headers: { 'x-api-key': 'k' },
  })
  t.same(erased.json(), { session_id: 'before-s1', erased_events: 100 })
  await append(batch(10, DAY, 'newest'))
  const ingest = await app.inject({
    method: 'POST',
    url: '/api/v1/telemetry/docs-search/batch',
    headers: { 'x-api-key': 'k' },
    payload: { events: batch(10, DAY, 'new') },
  })
  t.equal(ingest.statusCode, 202, 'old and new replicas ingest side by side')
})

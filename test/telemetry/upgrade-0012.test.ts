// Migrations 0012-0014 (KPI buckets per minute) under ingest: events stored before them, and
// batches sent while they run, all end up in the minute buckets exactly once, and every KPI
// window answers as the definitions over the events.
import t from 'tap'
import { createClient } from '../../src/db/client.js'
import { migrate } from '../../src/db/migrate.js'
import { createTelemetryRepository } from '../../src/repositories/telemetry.js'
import { createPartlyMigratedDatabase } from '../helpers/database.js'
import { REFERENCE_KPIS } from '../helpers/reference-kpis.js'
import { waitFor } from '../helpers/wait.js'

const MINUTE = 60_000
const now = Date.now()

t.test('minute buckets filled for the stored events and kept for batches sent during the migration', async (t) => {
  const db = await createPartlyMigratedDatabase(t, (f) => f < '0012')

  // Ingest on its own pool, as a replica would; the INSERT is the same before and after 0012.
  const pool = createClient(db.url, { max: 3 })
  t.teardown(() => pool.end())
  const telemetry = createTelemetryRepository(pool)
  const batch = (n: number, tag: string) =>
    Array.from({ length: n }, (_, i) => ({
      event: i % 3 === 0 ? 'search_result_click' : 'search_query',
      emitted_at_ms: now - ((i * 7_919) % (90 * MINUTE)),
      // shared query ids: a batch during the migration changes rows stored before it
      query_id: i % 7 === 0 ? '' : `q${i % 60}`,
      session_id: `${tag}-s${i % 4}`,
      results_count: i % 3,
      time_to_success_ms: i % 5 === 0 ? 300 + 40 * i : 0,
    }))
  await telemetry.append(batch(500, 'before'))

  let running = true
  let rounds = 0
  const traffic = Array.from({ length: 2 }, async (_, w) => {
    while (running) await telemetry.append(batch(40, `during-${w}-${rounds++}`))
  })
  await waitFor('batches before the migrations', () => rounds > 2)
  // the three of the KPI minutes first (later files follow them)
  t.same((await migrate(db.sql)).slice(0, 3), [
    '0012_docs_search_kpi_minutes.sql',
    '0013_docs_search_kpi_minutes_wait.sql',
    '0014_docs_search_kpi_minutes_fill.sql',
  ])
  const roundsAtMigration = rounds
  await waitFor('batches after the migrations', () => rounds > roundsAtMigration + 2)
  running = false
  await Promise.all(traffic)
  t.ok(rounds > 2, `${rounds} batches sent across the migrations`)

  for (const windowMinutes of [1, 7, 60, 61, 120]) {
    const from = now - windowMinutes * MINUTE - 1234
    const [expected] = await db.sql.unsafe(REFERENCE_KPIS, [from, now])
    const { zero_result_rate, query_ctr, ...counts } = await telemetry.metrics(from, now)
    t.same(counts, expected, `window of ${windowMinutes} min and a bit: as the definitions`)
  }

  const minutes = () =>
    db.sql`select minute_ms, band, queries, zero_result_queries, clicked, successes from docs_search_kpi_minutes
           where queries <> 0 or zero_result_queries <> 0 or clicked <> 0 or successes <> 0 order by minute_ms, band`
  const kept = await minutes()
  t.ok(kept.length > 0)
  await db.sql`select docs_search_kpi_minutes_rebuild()`
  t.same(
    kept,
    await minutes(),
    'the minute buckets are what a rebuild from the rollup makes (after the KPIs: the rebuild would mend them)',
  )
})

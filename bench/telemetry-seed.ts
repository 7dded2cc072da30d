// The telemetry data set of `make bench`: 10M docs-search events,
// 2.5M searches of 4 events each spread evenly over the 7 days before `now`, generated in SQL.
// Per search s: a search_query (results_count s % 5, so a fifth have none), two clicks (or two
// result views for every fourth search, which then has no click) and a search_success 7 s apart;
// two thirds carry a time to success (300 ms to 30 s).
// The events go in with the rollup trigger off and both rollups are then rebuilt in one pass by
// docs_search_rollups_rebuild() (migration 0008), which leaves them as the trigger would have
// (test/telemetry/metrics.test.ts checks that): ten times faster than 10M rows through the trigger.
import type postgres from 'postgres'
import { createTelemetryLifecycleRepository, DAY_MS, partitionName } from '../src/repositories/telemetry-lifecycle.js'

export const SEARCHES = Number(process.env.BENCH_SEARCHES ?? 2_500_000)
export const TELEMETRY_SHAPE = `${((SEARCHES * 4) / 1e6).toFixed(1)}M events (${(SEARCHES / 1e6).toFixed(2)}M searches of 4 events over 7 days)`
export const METRICS_WINDOWS = [60, 720, 1440, 10080]
/** The targets, median ms over 10M events. */
export const METRICS_TARGETS_MS: Record<number, number> = { 60: 20, 1440: 100, 10080: 300 }

const WEEK_MS = 7 * 24 * 3_600_000

export async function seedDocsSearch(sql: postgres.Sql, now: number): Promise<{ events: number; seconds: number }> {
  const started = performance.now()
  // The daily partitions a service running all week would have made (it makes them a day ahead).
  const lifecycle = createTelemetryLifecycleRepository(sql as never)
  const existing = new Set((await lifecycle.partitions()).map((p) => p.name))
  for (let day = Math.floor((now - WEEK_MS) / DAY_MS) * DAY_MS - DAY_MS; day <= now; day += DAY_MS) {
    if (!existing.has(partitionName(day))) await lifecycle.createPartition(partitionName(day), day, day + DAY_MS)
  }
  await sql.begin(async (tx) => {
    // Superuser only (the bench's local PostgreSQL): skips the statement trigger for the bulk load.
    await tx`set local session_replication_role = replica`
    await tx`
      insert into docs_search_events (event, emitted_at_ms, query_id, results_count, time_to_success_ms)
      select case k when 0 then 'search_query' when 3 then 'search_success'
                    else case when s % 4 = 1 then 'search_result_view' else 'search_result_click' end end,
             ${now}::bigint - ${WEEK_MS} + (s * ${WEEK_MS}) / ${SEARCHES} + k * 7000 - 21000,
             'q-' || s,
             case when k = 0 then s % 5 else 0 end,
             case when k = 3 and s % 2 = 0 then 300 + (s * 7919) % 20000
                  when k = 1 and s % 3 = 0 then 200 + (s * 104729) % 30000 else 0 end
      from generate_series(0::bigint, ${SEARCHES - 1}::bigint) s, generate_series(0, 3) k`
    await tx`select docs_search_rollups_rebuild()`
  })
  await sql`vacuum analyze docs_search_events, docs_search_queries, docs_search_kpi_buckets, docs_search_kpi_minutes`
  return { events: SEARCHES * 4, seconds: (performance.now() - started) / 1000 }
}

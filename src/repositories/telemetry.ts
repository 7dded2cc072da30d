// SQL for docs-search telemetry (table docs_search_events): multi-row append and the KPI query.
import type { Db } from '../db/client.js'
import type { components } from '../../generated/api.js'

export type DocsSearchEvent = components['schemas']['DocsSearchTelemetryIngestRequest']
export type DocsSearchMetrics = components['schemas']['DocsSearchTelemetryMetricsResponse']

const COLUMNS = [
  'event', 'emitted_at_ms', 'page_path', 'session_id', 'query_id', 'query_text', 'query_len', 'tokens_count',
  'results_count', 'result_rank', 'result_url', 'latency_ms', 'time_to_success_ms', 'time_to_click_ms', 'source',
  'top_results', 'payload',
] as const

// The KPI query; $1 and $2 bound the window (from, to] on emitted_at_ms. It reads the query-id
// rollup (docs_search_queries, kept by a trigger, migration 0007) instead of every event: a query
// whose events all lie inside the window contributes its rolled-up row; one with events on both
// sides of an edge is recomputed from its own events inside the window (found through the span
// index); events without a query id are counted from the events themselves.
// The recomputation is a lateral aggregate per straddling query over the (query_id, emitted_at_ms)
// index, not a join grouped by query id: no hashing of every event in the window (1M events, 50k
// straddling ids: 227 ms instead of 343 ms in psql). A straddler with no event inside the window
// yields a row of zeros and nulls, which every total and percentile below ignores.
const METRICS_SQL = `
  with per_query as (
    select queries, zero_result_queries, has_click, first_success_ms
    from docs_search_queries
    where first_ms > $1 and last_ms <= $2
    union all
    select e.queries, e.zero_result_queries, e.has_click, e.first_success_ms
    from docs_search_queries s
    cross join lateral (
      select count(*) filter (where event = 'search_query') as queries,
             count(*) filter (where event = 'search_query' and results_count = 0) as zero_result_queries,
             bool_or(event = 'search_result_click') as has_click,
             min(time_to_success_ms) filter (where time_to_success_ms > 0) as first_success_ms
      from docs_search_events
      where query_id = s.query_id and emitted_at_ms > $1 and emitted_at_ms <= $2
    ) e
    where (int8range(s.first_ms, s.last_ms, '[]') @> $1::bigint and s.last_ms > $1)
       or (int8range(s.first_ms, s.last_ms, '[]') @> ($2 + 1)::bigint and s.first_ms <= $2)
  ),
  unnamed as (
    select count(*) filter (where event = 'search_query') as queries,
           count(*) filter (where event = 'search_query' and results_count = 0) as zero_result_queries
    from docs_search_events
    where query_id = '' and emitted_at_ms > $1 and emitted_at_ms <= $2
  ),
  totals as (
    select (coalesce(sum(queries), 0) + (select queries from unnamed))::int as total,
           (coalesce(sum(zero_result_queries), 0) + (select zero_result_queries from unnamed))::int as zero,
           (count(*) filter (where queries > 0 and has_click))::int as clicked,
           -- one sort for both percentiles
           percentile_disc(array[0.5, 0.75]) within group (order by first_success_ms) as percentiles
    from per_query
  )
  select total as total_queries,
         zero as zero_result_queries,
         case when total = 0 then 0 else zero::float8 / total end as zero_result_rate,
         clicked as queries_with_click,
         case when total = 0 then 0 else clicked::float8 / total end as query_ctr,
         percentiles[1] as median_time_to_first_success_ms,
         percentiles[2] as p75_time_to_first_success_ms
  from totals`

export function createTelemetryRepository(db: Db) {
  return {
    /** Appends the events in one INSERT (its trigger updates the query rollup in the same statement); omitted optional fields take their defaults. */
    async append(events: DocsSearchEvent[]): Promise<number> {
      const rows = events.map((e) => ({
        event: e.event,
        emitted_at_ms: e.emitted_at_ms,
        page_path: e.page_path ?? '',
        session_id: e.session_id ?? '',
        query_id: e.query_id ?? '',
        query_text: e.query_text ?? '',
        query_len: e.query_len ?? 0,
        tokens_count: e.tokens_count ?? 0,
        results_count: e.results_count ?? 0,
        result_rank: e.result_rank ?? 0,
        result_url: e.result_url ?? '',
        latency_ms: e.latency_ms ?? 0,
        time_to_success_ms: e.time_to_success_ms ?? 0,
        time_to_click_ms: e.time_to_click_ms ?? 0,
        source: e.source ?? '',
        top_results: e.top_results === undefined ? null : db.json(e.top_results as never),
        payload: e.payload === undefined ? null : db.json(e.payload as never),
      }))
      await db`insert into docs_search_events ${db(rows as never, COLUMNS as never)}`
      return rows.length
    },

    /**
     * Every KPI of the window (fromMs, toMs] in one round trip. Planned for each call's window
     * (an unnamed statement): whether the rollup is best scanned whole or through its span
     * index depends on how much of it the window covers, which a cached generic plan cannot know.
     */
    async metrics(fromMs: number, toMs: number): Promise<Omit<DocsSearchMetrics, 'window_minutes'>> {
      const [row] = await db.unsafe<Omit<DocsSearchMetrics, 'window_minutes'>[]>(METRICS_SQL, [fromMs, toMs], { prepare: false })
      return row!
    },
  }
}

export type TelemetryRepository = ReturnType<typeof createTelemetryRepository>

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

// The KPI query; $1 and $2 bound the window on emitted_at_ms.
const METRICS_SQL = `
  with per_query as (
    select query_id,
           count(*) filter (where event = 'search_query') as queries,
           count(*) filter (where event = 'search_query' and results_count = 0) as zero_results,
           bool_or(event = 'search_result_click') as has_click,
           min(time_to_success_ms) filter (where time_to_success_ms > 0) as first_success_ms
    from docs_search_events
    where emitted_at_ms > $1 and emitted_at_ms <= $2
    group by query_id
  ),
  totals as (
    select coalesce(sum(queries), 0)::int as total,
           coalesce(sum(zero_results), 0)::int as zero,
           (count(*) filter (where query_id <> '' and queries > 0 and has_click))::int as clicked,
           percentile_disc(0.5) within group (order by first_success_ms) filter (where query_id <> '') as median,
           percentile_disc(0.75) within group (order by first_success_ms) filter (where query_id <> '') as p75
    from per_query
  )
  select total as total_queries,
         zero as zero_result_queries,
         case when total = 0 then 0 else zero::float8 / total end as zero_result_rate,
         clicked as queries_with_click,
         case when total = 0 then 0 else clicked::float8 / total end as query_ctr,
         median as median_time_to_first_success_ms,
         p75 as p75_time_to_first_success_ms
  from totals`

export function createTelemetryRepository(db: Db) {
  return {
    /** Appends the events in one INSERT; omitted optional fields take their defaults. */
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
     * Every KPI of the window (fromMs, toMs] in one round trip and one scan: events are grouped
     * by query_id once (the '' group carries the queries without an id, which count as queries
     * but never as clicked or successful), then the groups are summed. Planned for each call's
     * window (an unnamed statement): a cached generic plan cannot know that a wide window covers
     * most of the table and picks an index scan that is several times slower than the parallel
     * scan (1.2 s instead of 0.2 s over 1M events, measured).
     */
    async metrics(fromMs: number, toMs: number): Promise<Omit<DocsSearchMetrics, 'window_minutes'>> {
      const [row] = await db.unsafe<Omit<DocsSearchMetrics, 'window_minutes'>[]>(METRICS_SQL, [fromMs, toMs], { prepare: false })
      return row!
    },
  }
}

export type TelemetryRepository = ReturnType<typeof createTelemetryRepository>

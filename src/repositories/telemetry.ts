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

    /** Every KPI of the window (fromMs, toMs] in one round trip. */
    async metrics(fromMs: number, toMs: number): Promise<Omit<DocsSearchMetrics, 'window_minutes'>> {
      const [row] = await db<Omit<DocsSearchMetrics, 'window_minutes'>[]>`
        with w as materialized (
          select event, query_id, results_count, time_to_success_ms
          from docs_search_events
          where emitted_at_ms > ${fromMs} and emitted_at_ms <= ${toMs}
        ),
        queries as (
          select count(*)::int as total, count(*) filter (where results_count = 0)::int as zero
          from w where event = 'search_query'
        ),
        per_query as (
          select query_id,
                 bool_or(event = 'search_query') and bool_or(event = 'search_result_click') as clicked,
                 min(time_to_success_ms) filter (where time_to_success_ms > 0) as first_success_ms
          from w where query_id <> '' group by query_id
        ),
        outcomes as (
          select count(*) filter (where clicked)::int as clicked,
                 percentile_disc(0.5) within group (order by first_success_ms) as median,
                 percentile_disc(0.75) within group (order by first_success_ms) as p75
          from per_query
        )
        select q.total as total_queries,
               q.zero as zero_result_queries,
               case when q.total = 0 then 0 else q.zero::float8 / q.total end as zero_result_rate,
               o.clicked as queries_with_click,
               case when q.total = 0 then 0 else o.clicked::float8 / q.total end as query_ctr,
               o.median as median_time_to_first_success_ms,
               o.p75 as p75_time_to_first_success_ms
        from queries q, outcomes o`
      return row!
    },
  }
}

export type TelemetryRepository = ReturnType<typeof createTelemetryRepository>

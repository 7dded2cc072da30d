// The docs-search KPI definitions written directly over the raw events, with no rollup or
// buckets: the reference the service's answer must equal ($1, $2: the window's bounds in ms).
export const REFERENCE_KPIS = `
  with per_query as (
    select query_id,
           count(*) filter (where event = 'search_query') as queries,
           count(*) filter (where event = 'search_query' and results_count = 0) as zero_results,
           bool_or(event = 'search_result_click') as has_click,
           min(time_to_success_ms) filter (where time_to_success_ms > 0) as first_success_ms
    from docs_search_events
    where emitted_at_ms > $1 and emitted_at_ms <= $2
    group by query_id
  )
  select coalesce(sum(queries), 0)::int as total_queries,
         coalesce(sum(zero_results), 0)::int as zero_result_queries,
         (count(*) filter (where query_id <> '' and queries > 0 and has_click))::int as queries_with_click,
         percentile_disc(0.5) within group (order by first_success_ms) filter (where query_id <> '') as median_time_to_first_success_ms,
         percentile_disc(0.75) within group (order by first_success_ms) filter (where query_id <> '') as p75_time_to_first_success_ms
  from per_query`

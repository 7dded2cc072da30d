-- Fills the minute buckets (0012) for the events stored before them, while ingest goes on.
--
-- Since 0013 every batch counts its own change into the minute buckets; what they lack is the
-- rollup as it stood before 0012. One statement reads with one snapshot: the rollup's sums per
-- minute minus the minute buckets in that same snapshot is what is missing, and it is added to
-- the live rows (batches committed after the snapshot have added theirs, or add them on top).
-- Rows are taken in key order, as ingest takes them, so the two cannot deadlock, and the current
-- minutes, which ingest upserts, come last: ingest waits only for the end of this file.
insert into docs_search_kpi_minutes as m (minute_ms, band, queries, zero_result_queries, clicked, successes)
select minute_ms, band, sum(queries), sum(zero_result_queries), sum(clicked), sum(successes)
from (
  select (first_ms / 60000) * 60000 as minute_ms, coalesce(docs_search_band(first_success_ms), -1) as band,
         queries::bigint as queries, zero_result_queries::bigint as zero_result_queries,
         (queries > 0 and has_click)::int::bigint as clicked, (first_success_ms is not null)::int::bigint as successes
  from docs_search_queries
  union all
  select (emitted_at_ms / 60000) * 60000, -1,
         (event = 'search_query')::int, (event = 'search_query' and results_count = 0)::int, 0, 0
  from docs_search_events where query_id = ''
  union all
  select minute_ms, band, -queries, -zero_result_queries, -clicked, -successes
  from docs_search_kpi_minutes
) missing
group by minute_ms, band
having sum(queries) <> 0 or sum(zero_result_queries) <> 0 or sum(clicked) <> 0 or sum(successes) <> 0
order by minute_ms, band
on conflict (minute_ms, band) do update set
  queries = m.queries + excluded.queries,
  zero_result_queries = m.zero_result_queries + excluded.zero_result_queries,
  clicked = m.clicked + excluded.clicked,
  successes = m.successes + excluded.successes;

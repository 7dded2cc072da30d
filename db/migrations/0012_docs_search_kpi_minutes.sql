-- KPI buckets per minute beside the hourly ones, so that a window's edges read at most a minute
-- of rollup rows each instead of up to an hour (at 600,000 events an hour, the 60-minute window
-- read about an hour of rows). A window now adds up its whole hours from docs_search_kpi_buckets,
-- the whole minutes around them from docs_search_kpi_minutes, and reads the rollup rows only for
-- the partial minutes at its two edges.
--
-- Expand only: the hourly buckets are kept as before, so a previous release's KPI query answers
-- as it did. This file starts the minute buckets (table and trigger); 0013 waits until every
-- batch that ran the previous trigger has committed, and 0014 fills them for the events before.

create table docs_search_kpi_minutes (
  -- start of the minute (epoch ms) of the query's first event; of the event itself for events
  -- without a query id
  minute_ms bigint not null,
  -- the same columns as docs_search_kpi_buckets
  band integer not null,
  queries bigint not null,
  zero_result_queries bigint not null,
  clicked bigint not null,
  successes bigint not null,
  primary key (minute_ms, band)
);

create or replace function docs_search_queries_roll_up() returns trigger language plpgsql as $$
begin
  with rolled as (
    -- Sorted by query id so that concurrent batches lock shared rows in the same order.
    insert into docs_search_queries as q (query_id, first_ms, last_ms, queries, zero_result_queries, has_click, first_success_ms)
    select query_id,
           min(emitted_at_ms), max(emitted_at_ms),
           count(*) filter (where event = 'search_query'),
           count(*) filter (where event = 'search_query' and results_count = 0),
           bool_or(event = 'search_result_click'),
           min(time_to_success_ms) filter (where time_to_success_ms > 0)
    from added
    where query_id <> ''
    group by query_id
    order by query_id
    on conflict (query_id) do update set
      prev_first_ms = q.first_ms,
      prev_queries = q.queries,
      prev_zero_result_queries = q.zero_result_queries,
      prev_has_click = q.has_click,
      prev_first_success_ms = q.first_success_ms,
      first_ms = least(q.first_ms, excluded.first_ms),
      last_ms = greatest(q.last_ms, excluded.last_ms),
      queries = q.queries + excluded.queries,
      zero_result_queries = q.zero_result_queries + excluded.zero_result_queries,
      has_click = q.has_click or excluded.has_click,
      first_success_ms = least(q.first_success_ms, excluded.first_success_ms)
    returning q.*
  ),
  -- Each changed query's row counted in, its previous row counted out, and the events without
  -- a query id counted in the minute they were emitted.
  changes (at_ms, queries, zero_result_queries, has_click, first_success_ms, sign) as (
    select first_ms, queries, zero_result_queries, has_click, first_success_ms, 1 from rolled
    union all
    select prev_first_ms, prev_queries, prev_zero_result_queries, prev_has_click, prev_first_success_ms, -1
    from rolled where prev_first_ms is not null
    union all
    select emitted_at_ms, (event = 'search_query')::int, (event = 'search_query' and results_count = 0)::int, false, null, 1
    from added where query_id = ''
  ),
  -- A change that moves nothing (a repeated click) is skipped.
  minute_deltas as (
    select *
    from (
      select (at_ms / 60000) * 60000 as minute_ms,
             coalesce(docs_search_band(first_success_ms), -1) as band,
             sum(sign * queries) as queries,
             sum(sign * zero_result_queries) as zero_result_queries,
             sum(sign * (queries > 0 and has_click)::int) as clicked,
             sum(sign * (first_success_ms is not null)::int) as successes
      from changes
      group by 1, 2
    ) d
    where queries <> 0 or zero_result_queries <> 0 or clicked <> 0 or successes <> 0
  ),
  -- Sorted by key, as the rollup, for the same reason. (A data-modifying WITH runs whether or not
  -- the statement reads it.)
  minutes as (
    insert into docs_search_kpi_minutes as m (minute_ms, band, queries, zero_result_queries, clicked, successes)
    select minute_ms, band, queries, zero_result_queries, clicked, successes
    from minute_deltas
    order by minute_ms, band
    on conflict (minute_ms, band) do update set
      queries = m.queries + excluded.queries,
      zero_result_queries = m.zero_result_queries + excluded.zero_result_queries,
      clicked = m.clicked + excluded.clicked,
      successes = m.successes + excluded.successes
  )
  insert into docs_search_kpi_buckets as b (hour_ms, band, queries, zero_result_queries, clicked, successes)
  select hour_ms, band, queries, zero_result_queries, clicked, successes
  from (
    select (minute_ms / 3600000) * 3600000 as hour_ms, band, sum(queries) as queries,
           sum(zero_result_queries) as zero_result_queries, sum(clicked) as clicked, sum(successes) as successes
    from minute_deltas
    group by 1, 2
  ) hour_deltas
  where queries <> 0 or zero_result_queries <> 0 or clicked <> 0 or successes <> 0
  order by hour_ms, band
  on conflict (hour_ms, band) do update set
    queries = b.queries + excluded.queries,
    zero_result_queries = b.zero_result_queries + excluded.zero_result_queries,
    clicked = b.clicked + excluded.clicked,
    successes = b.successes + excluded.successes;
  return null;
end $$;

-- The minute buckets from the query rollup and the events without a query id, from scratch (for
-- docs_search_rollups_rebuild(), which runs with the trigger quiet).
create function docs_search_kpi_minutes_rebuild() returns void language sql as $$
  delete from docs_search_kpi_minutes;
  insert into docs_search_kpi_minutes (minute_ms, band, queries, zero_result_queries, clicked, successes)
  select minute_ms, band, sum(queries), sum(zero_result_queries), sum(clicked), sum(successes)
  from (
    select (first_ms / 60000) * 60000 as minute_ms, coalesce(docs_search_band(first_success_ms), -1) as band,
           queries, zero_result_queries, (queries > 0 and has_click)::int as clicked, (first_success_ms is not null)::int as successes
    from docs_search_queries
    union all
    select (emitted_at_ms / 60000) * 60000, -1,
           (event = 'search_query')::int, (event = 'search_query' and results_count = 0)::int, 0, 0
    from docs_search_events where query_id = ''
  ) rows
  group by minute_ms, band;
$$;

-- Rebuilds both rollups from the events, as the trigger would have left them (a bulk load's:
-- events inserted with the trigger off, e.g. a benchmark's seed).
create or replace function docs_search_rollups_rebuild() returns void language sql as $$
  delete from docs_search_kpi_buckets;
  delete from docs_search_queries;
  insert into docs_search_queries (query_id, first_ms, last_ms, queries, zero_result_queries, has_click, first_success_ms)
  select query_id,
         min(emitted_at_ms), max(emitted_at_ms),
         count(*) filter (where event = 'search_query'),
         count(*) filter (where event = 'search_query' and results_count = 0),
         bool_or(event = 'search_result_click'),
         min(time_to_success_ms) filter (where time_to_success_ms > 0)
  from docs_search_events
  where query_id <> ''
  group by query_id;
  select docs_search_kpi_minutes_rebuild();
  insert into docs_search_kpi_buckets (hour_ms, band, queries, zero_result_queries, clicked, successes)
  select (minute_ms / 3600000) * 3600000, band, sum(queries), sum(zero_result_queries), sum(clicked), sum(successes)
  from docs_search_kpi_minutes
  group by 1, 2;
$$;

-- Both kinds of bucket are sums of the query rollup: emptying the rollup empties them.
create or replace function docs_search_kpi_buckets_truncate() returns trigger language plpgsql as $$
begin
  truncate docs_search_kpi_buckets, docs_search_kpi_minutes;
  return null;
end $$;

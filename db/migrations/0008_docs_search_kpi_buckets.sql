-- Docs-search KPIs that read only their own window. Before this, every window paid a pass over
-- the whole query rollup (no index served `first_ms > $1 and last_ms <= $2`) and the 7-day window
-- sorted every first-success value for two percentiles (10M events: 771 ms).
--
-- docs_search_kpi_buckets holds, per hour of a query's first event and per band of its first
-- success, the sums of the query rollup's rows: queries, zero-result queries, clicked queries
-- and how many have a first success. A window adds up the hours that lie wholly inside it and
-- reads the rollup rows only for the partial hours at its two edges. The exact nearest-rank
-- percentiles come from the band counts: they name the band that holds the wanted rank, and
-- only that band's values inside the window are read, through an index on the value.

-- The previous values of a rollup row, set by the upsert that changes it, so that the same
-- statement knows what to take out of the hour it used to count in (PostgreSQL 15 has no OLD in
-- RETURNING). Null after an insert.
-- migration-safety: access-exclusive: nullable columns without a default change only the catalog (no rewrite): held for milliseconds
alter table docs_search_queries
  add column prev_first_ms bigint,
  add column prev_queries integer,
  add column prev_zero_result_queries integer,
  add column prev_has_click boolean,
  add column prev_first_success_ms integer;

-- A first-success value's band: 250 ms wide, everything from 120 s on in the last one; null for
-- none (strict: least() would skip the null and answer 480).
create function docs_search_band(ms integer) returns integer
  language sql immutable strict parallel safe as $$ select least(ms / 250, 480) $$;

create table docs_search_kpi_buckets (
  -- start of the hour (epoch ms) of the query's first event; of the event itself for events
  -- without a query id
  hour_ms bigint not null,
  -- docs_search_band(first_success_ms), -1 when the query has no first success
  band integer not null,
  queries bigint not null,
  zero_result_queries bigint not null,
  -- queries with at least one search_query and one search_result_click
  clicked bigint not null,
  -- queries with a first success (0 in band -1)
  successes bigint not null,
  primary key (hour_ms, band)
);

-- The rollup rows of a window's partial hours, read from the index alone.
create index docs_search_queries_first on docs_search_queries (first_ms)
  include (last_ms, queries, zero_result_queries, has_click, first_success_ms);

-- The exact values of one band inside a window.
create index docs_search_queries_success on docs_search_queries (first_success_ms, first_ms)
  include (last_ms) where first_success_ms is not null;

-- Events without a query id in a window's partial hours (the full hours are in the buckets).
create index docs_search_events_unnamed on docs_search_events (emitted_at_ms)
  include (event, results_count) where query_id = '';

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
  -- a query id counted in the hour they were emitted.
  changes (at_ms, queries, zero_result_queries, has_click, first_success_ms, sign) as (
    select first_ms, queries, zero_result_queries, has_click, first_success_ms, 1 from rolled
    union all
    select prev_first_ms, prev_queries, prev_zero_result_queries, prev_has_click, prev_first_success_ms, -1
    from rolled where prev_first_ms is not null
    union all
    select emitted_at_ms, (event = 'search_query')::int, (event = 'search_query' and results_count = 0)::int, false, null, 1
    from added where query_id = ''
  ),
  deltas as (
    select (at_ms / 3600000) * 3600000 as hour_ms,
           coalesce(docs_search_band(first_success_ms), -1) as band,
           sum(sign * queries) as queries,
           sum(sign * zero_result_queries) as zero_result_queries,
           sum(sign * (queries > 0 and has_click)::int) as clicked,
           sum(sign * (first_success_ms is not null)::int) as successes
    from changes
    group by 1, 2
  )
  -- Sorted by key for the same reason; a change that moves nothing (a repeated click) is skipped.
  insert into docs_search_kpi_buckets as b (hour_ms, band, queries, zero_result_queries, clicked, successes)
  select hour_ms, band, queries, zero_result_queries, clicked, successes
  from deltas
  where queries <> 0 or zero_result_queries <> 0 or clicked <> 0 or successes <> 0
  order by hour_ms, band
  on conflict (hour_ms, band) do update set
    queries = b.queries + excluded.queries,
    zero_result_queries = b.zero_result_queries + excluded.zero_result_queries,
    clicked = b.clicked + excluded.clicked,
    successes = b.successes + excluded.successes;
  return null;
end $$;

-- Rebuilds both rollups from the events, as the trigger would have left them: this migration's
-- backfill, and a bulk load's (events inserted with the trigger off, e.g. a benchmark's seed).
create function docs_search_rollups_rebuild() returns void language sql as $$
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
  insert into docs_search_kpi_buckets (hour_ms, band, queries, zero_result_queries, clicked, successes)
  select hour_ms, band, sum(queries), sum(zero_result_queries), sum(clicked), sum(successes)
  from (
    select (first_ms / 3600000) * 3600000 as hour_ms, coalesce(docs_search_band(first_success_ms), -1) as band,
           queries, zero_result_queries, (queries > 0 and has_click)::int as clicked, (first_success_ms is not null)::int as successes
    from docs_search_queries
    union all
    select (emitted_at_ms / 3600000) * 3600000, -1,
           (event = 'search_query')::int, (event = 'search_query' and results_count = 0)::int, 0, 0
    from docs_search_events where query_id = ''
  ) rows
  group by hour_ms, band;
$$;

-- The buckets are sums of the query rollup: emptying the rollup empties them.
create function docs_search_kpi_buckets_truncate() returns trigger language plpgsql as $$
begin
  truncate docs_search_kpi_buckets;
  return null;
end $$;

create trigger docs_search_kpi_buckets_truncate after truncate on docs_search_queries
  for each statement execute function docs_search_kpi_buckets_truncate();

-- Events stored before this migration.
select docs_search_rollups_rebuild();

-- The docs-search analytics (docs/docs-search-analytics.md) read a rollup per UTC day and hour
-- instead of grouping the raw events of their range. The service's analytics job
-- (src/telemetry/analytics-rollup.ts) recomputes from the raw events every 5-minute slice that
-- ingest or an erasure touched since its last run, and the slices that share a query id with
-- them, then sums their hours and days again.
--
-- A click belongs to the searches with its query id, anywhere in the range, and ranges are whole
-- UTC days. So a query id whose searches and clicks all lie in one UTC day is settled per slice;
-- one whose events span days is kept per (slice, query id) and paired when a range is read. Which
-- of the two an id is, and which slices its events lie in, the rollup keeps itself
-- (docs_search_analytics_ids).
--
-- Expand only: new tables and a trigger that appends to a log; nothing a previous release reads
-- changes. Its replicas' batches fire the trigger too.

-- Per 5-minute slice and normalised query: the searches, and what their clicks add when the query
-- id stays within one day. The unit the refresh recomputes.
create table docs_search_analytics_slices (
  slice_ms bigint not null,
  query text not null,
  searches integer not null,
  no_results integer not null,
  -- searches of one-day query ids that have a click
  with_click integer not null,
  -- searches with results and no click: without a query id, or of a one-day query id
  no_click integer not null,
  -- searches without a session (each one a session of its own), and the least distinct session
  -- ids, at most 10 (all of them when fewer): together they tell whether at least N distinct
  -- sessions asked, for N up to 10, over any range of rows
  unnamed integer not null,
  sessions text[] not null,
  -- clicks of rank 1 or more in this slice of one-day query ids, once per query their id was asked as
  ranked_clicks integer not null,
  rank_sum bigint not null,
  primary key (slice_ms, query)
);

-- The same per UTC hour, summed from its slices by each refresh: what the hourly series reads.
create table docs_search_analytics_hours (
  hour_ms bigint not null,
  query text not null,
  searches integer not null,
  no_results integer not null,
  with_click integer not null,
  no_click integer not null,
  unnamed integer not null,
  sessions text[] not null,
  ranked_clicks integer not null,
  rank_sum bigint not null,
  primary key (hour_ms, query)
);

-- The same per UTC day, summed from the hours by each refresh: what the lists and the daily series
-- read (a range is whole days).
create table docs_search_analytics_days (
  day_ms bigint not null,
  query text not null,
  searches integer not null,
  no_results integer not null,
  with_click integer not null,
  no_click integer not null,
  unnamed integer not null,
  sessions text[] not null,
  ranked_clicks integer not null,
  rank_sum bigint not null,
  primary key (day_ms, query)
);

-- Searches and clicks of query ids whose events span UTC days, per slice, paired when a range is read.
create table docs_search_analytics_spanning_searches (
  slice_ms bigint not null,
  query_id text not null,
  query text not null,
  searches integer not null,
  with_results integer not null,
  primary key (slice_ms, query_id, query)
);
create table docs_search_analytics_spanning_clicks (
  slice_ms bigint not null,
  query_id text not null,
  clicks integer not null,
  ranked_clicks integer not null,
  rank_sum bigint not null,
  primary key (slice_ms, query_id)
);

-- Every slice that holds a search or click of each query id, as the refresh last read them
-- (sorted): when an event of the id arrives, the refresh recomputes these slices with its own, and
-- reads the id's events in them wherever they are kept (a daily partition or an archived day). Kept by the
-- analytics alone: the KPI rollup's spans (docs_search_queries) are deleted past the KPI horizon,
-- and an archived day has no query id index to find them by.
-- With them, the state the id's share of those slices was computed with: whether its events lie
-- within one UTC day, whether it has a click, and the queries it was asked as. A new event of the
-- id recomputes its own slice whole, and in its other slices only the id's share, from this state
-- to the new one.
create table docs_search_analytics_ids (
  query_id text primary key,
  slices bigint[] not null,
  one_day boolean not null,
  clicked boolean not null,
  queries text[] not null
);
-- The ids holding a slice the refresh recomputes.
create index docs_search_analytics_ids_slices on docs_search_analytics_ids using gin (slices);

-- Clicks per slice by rank bucket: from_rank 1 to 10, 11 (11 to 20) and 21 (21 and above).
create table docs_search_analytics_ranks (
  slice_ms bigint not null,
  from_rank integer not null,
  clicks integer not null,
  primary key (slice_ms, from_rank)
);

-- The same per UTC day, summed from the slices by each refresh: what the click positions read.
create table docs_search_analytics_rank_days (
  day_ms bigint not null,
  from_rank integer not null,
  clicks integer not null,
  primary key (day_ms, from_rank)
);

-- What the job has to recompute: the slices a batch or an erasure touched (and an erased event's
-- query id, whose other slices depend on it). An append-only log without a key, so that
-- concurrent batches never wait for each other on it; the job deletes the rows it has read.
create table docs_search_analytics_dirty (
  slice_ms bigint not null,
  query_id text not null default ''
);

create function docs_search_analytics_touch() returns trigger language plpgsql as $$
begin
  insert into docs_search_analytics_dirty (slice_ms)
  select distinct (emitted_at_ms / 300000) * 300000 from added
  where event in ('search_query', 'search_result_click');
  return null;
end $$;

-- Waits for the batches in flight (SHARE ROW EXCLUSIVE, not ACCESS EXCLUSIVE: reads go on); from
-- the commit on, every batch logs its slices, and the statement below logs those stored before.
create trigger docs_search_analytics_touch after insert on docs_search_events
  referencing new table as added for each statement execute function docs_search_analytics_touch();

-- Every slice that holds events: those of the partitioned table found one slice at a time through
-- its time index, and every slice of each day archived past the KPI horizon (no time index there).
insert into docs_search_analytics_dirty (slice_ms)
with recursive slices (slice_ms) as (
  select (min(emitted_at_ms) / 300000) * 300000 from docs_search_events
  union all
  select (select (min(emitted_at_ms) / 300000) * 300000 from docs_search_events where emitted_at_ms >= slices.slice_ms + 300000)
  from slices where slices.slice_ms is not null
)
select slice_ms from slices where slice_ms is not null
union all
select (to_date(substr(relname, 21), 'YYYYMMDD') - date '1970-01-01')::bigint * 86400000 + h * 300000
from pg_class, generate_series(0, 287) h
where relnamespace = current_schema()::regnamespace and relkind = 'r' and relname ~ '^docs_search_archive_[0-9]{8}$';

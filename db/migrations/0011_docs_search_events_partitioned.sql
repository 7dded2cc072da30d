-- Docs-search events in time partitions (declarative, by UTC day of emitted_at_ms), so that
-- retention drops whole partitions instead of deleting rows (TELEMETRY_RETENTION_DAYS).
--
-- Expand/contract for a rolling upgrade: the partitioned table takes the name and the columns
-- the previous release's INSERT and KPI queries use (not `id`, which nothing reads), and the
-- old table becomes its partition for every time before tomorrow (UTC), so no stored event
-- moves. The service creates the daily partitions itself (src/telemetry/partitions.ts): from
-- tomorrow on, ahead of time, and a DEFAULT partition takes any event outside them.
-- Old replicas' telemetry statements wait for this migration (the attach below checks the old
-- table's rows once) and then run against the new table of the same name.
set local lock_timeout = '5s';
set local statement_timeout = '15min';

-- migration-safety: access-exclusive: a rename is catalogue-only; old replicas' telemetry waits until commit, then uses the partitioned table of the same name
alter table docs_search_events rename to docs_search_events_legacy;
-- migration-safety: access-exclusive: dropping a column is catalogue-only; the lock is already held by the rename above
alter table docs_search_events_legacy drop column id;
alter index docs_search_events_window rename to docs_search_events_legacy_window;
alter index docs_search_events_query rename to docs_search_events_legacy_query;
alter index docs_search_events_unnamed rename to docs_search_events_legacy_unnamed;
-- migration-safety: access-exclusive: the trigger moves to the partitioned table below; the lock is already held by the rename above
drop trigger docs_search_queries_roll_up on docs_search_events_legacy;

create table docs_search_events (
  event text not null,
  emitted_at_ms bigint not null,
  page_path text not null default '',
  session_id text not null default '',
  query_id text not null default '',
  query_text text not null default '',
  query_len integer not null default 0,
  tokens_count integer not null default 0,
  results_count integer not null default 0,
  result_rank integer not null default 0,
  result_url text not null default '',
  latency_ms integer not null default 0,
  time_to_success_ms integer not null default 0,
  time_to_click_ms integer not null default 0,
  source text not null default '',
  top_results jsonb,
  payload jsonb,
  received_at timestamptz not null default now()
) partition by range (emitted_at_ms);

-- The same three indexes as before (the old table's own match them, so attaching it builds none).
create index docs_search_events_window on docs_search_events (emitted_at_ms)
  include (event, query_id, results_count, time_to_success_ms);
create index docs_search_events_query on docs_search_events (query_id, emitted_at_ms)
  include (event, results_count, time_to_success_ms);
create index docs_search_events_unnamed on docs_search_events (emitted_at_ms)
  include (event, results_count) where query_id = '';

-- Events whose time no other partition covers: far in the past or the future.
create table docs_search_events_default partition of docs_search_events default;
-- Erasure finds a session's events through this index, one per partition (the service adds it to
-- each partition it creates; partial: most events of a site without sessions carry '').
create index docs_search_events_default_session on docs_search_events_default (session_id) where session_id <> '';

-- migration-safety: access-exclusive: attaching the old table (locked since the rename) scans it once to check its bound; old replicas' telemetry waits for it
do $$
declare
  -- start of tomorrow (UTC), epoch ms: the first daily partition's start
  tomorrow bigint := (floor(extract(epoch from now()) / 86400)::bigint + 1) * 86400000;
begin
  if not exists (select 1 from docs_search_events_legacy) then
    -- A new database: the daily partitions and the default take everything.
    drop table docs_search_events_legacy;
    return;
  end if;
  -- Events dated tomorrow or later (clients with a clock ahead) move to the new table, so that the
  -- old one holds only times before tomorrow; found through the old time index.
  insert into docs_search_events
  select event, emitted_at_ms, page_path, session_id, query_id, query_text, query_len, tokens_count, results_count, result_rank,
         result_url, latency_ms, time_to_success_ms, time_to_click_ms, source, top_results, payload, received_at
  from docs_search_events_legacy where emitted_at_ms >= tomorrow;
  delete from docs_search_events_legacy where emitted_at_ms >= tomorrow;
  execute format('alter table docs_search_events attach partition docs_search_events_legacy for values from (minvalue) to (%s)', tomorrow);
end $$;

-- The rollup trigger, now on the partitioned table (statement level: it sees the whole batch).
create trigger docs_search_queries_roll_up after insert on docs_search_events
  referencing new table as added for each statement execute function docs_search_queries_roll_up();

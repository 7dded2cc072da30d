-- Docs-search telemetry: append-only, the service's highest-volume write. The KPI window is
-- on the client's emitted_at_ms; the covering index lets the metrics query read only the
-- index for the window (no heap access once the visibility map is set).
create table docs_search_events (
  id bigint generated always as identity primary key,
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
);

create index docs_search_events_window on docs_search_events (emitted_at_ms)
  include (event, query_id, results_count, time_to_success_ms);

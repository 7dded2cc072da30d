-- docs_search_band() as PostgreSQL can inline it. Declared strict, its body (least(), which
-- skips nulls) is not strict itself, so the planner called it as a function for every row:
-- the KPI query evaluates it over every rollup row of a window's edges and adjustments, and
-- those calls were most of a small window's time. The same values, null for null, written
-- so that no strict declaration is needed.
create or replace function docs_search_band(ms integer) returns integer
  language sql immutable parallel safe as $$ select case when ms is not null then least(ms / 250, 480) end $$;

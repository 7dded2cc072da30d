-- pgBackRest's view of its repository, readable from SQL (as pgBackRest's user guide shows under
-- "Monitoring"): prometheus-postgres-exporter reads the newest backup's stop time through it
-- (deploy/prometheus/postgres-exporter-queries.yaml). Run once as the postgres user:
--   psql -p PORT -f deploy/pgbackrest/monitor.sql
-- COPY FROM PROGRAM runs `pgbackrest info` as the server's OS user; the function is SECURITY
-- DEFINER so that the exporter's role needs only EXECUTE on it, not the right to run programs.
create schema if not exists monitor;

create or replace function monitor.pgbackrest_info() returns jsonb
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
  info jsonb;
begin
  create temp table if not exists pgbackrest_info_output (line text) on commit drop;
  truncate pgbackrest_info_output;
  -- CSV with a quote and delimiter that never occur: each line is taken as is, backslashes too.
  copy pgbackrest_info_output (line) from program 'pgbackrest --output=json info'
    with (format csv, quote e'\x01', delimiter e'\x02');
  select string_agg(line, e'\n')::jsonb into info from pgbackrest_info_output;
  return info;
end
$$;

revoke all on function monitor.pgbackrest_info() from public;

-- The exporter's role (Debian's prometheus-postgres-exporter connects as `prometheus` over the
-- local socket): the statistics views, and the function above.
do $$
begin
  if not exists (select from pg_roles where rolname = 'prometheus') then
    create role prometheus login;
  end if;
end
$$;
grant pg_monitor to prometheus;
grant usage on schema monitor to prometheus;
grant execute on function monitor.pgbackrest_info() to prometheus;

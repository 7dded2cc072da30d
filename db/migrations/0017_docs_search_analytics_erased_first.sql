-- The analytics refresh takes the slices an erasure logged before any other (a refresh bounded
-- by its budget leaves the oldest slices of a burst for later; an erased session's queries must
-- not wait behind them). Expand only: the previous release's erasure logs rows without the flag,
-- taken in its old order, and its refresh ignores the column.
-- migration-safety: access-exclusive: the log holds the slices logged since the last refresh, and a column with a constant default rewrites nothing
alter table docs_search_analytics_dirty add column erased boolean not null default false;

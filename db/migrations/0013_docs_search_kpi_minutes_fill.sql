-- Fills the minute buckets (0012) for the events stored before them.
--
-- A batch whose trigger started before 0012 committed runs the previous trigger to its end and
-- updates no minute bucket. The lock below waits until every such batch has committed (each holds
-- its INSERT's lock on the rollup table until then, even when it inserts no row), so the rollup read by the fill holds them all. Batches
-- that start meanwhile wait at their rollup upsert for the length of the fill (seconds at tens of
-- millions of events), then count their own change into the filled buckets: the fill reads the
-- rollup as it stood before them.
-- SHARE ROW EXCLUSIVE, not ACCESS EXCLUSIVE: reads of the rollup (the KPI query) go on.
lock table docs_search_queries in share row exclusive mode;
select docs_search_kpi_minutes_rebuild();

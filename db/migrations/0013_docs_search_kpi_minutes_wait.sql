-- Waits until every batch that may have run the trigger of before 0012 has committed, so that the
-- fill (0014) sees all of them in the rollup. Such a batch holds its INSERT's lock on
-- docs_search_events from before its trigger fired until its commit. Batches that start meanwhile
-- wait as long as the longest batch in flight, then run 0012's trigger.
-- SHARE ROW EXCLUSIVE, not ACCESS EXCLUSIVE: reads (the KPI query) go on; its own file, so that
-- the lock ends at once.
lock table docs_search_events in share row exclusive mode;

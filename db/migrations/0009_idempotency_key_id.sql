-- Idempotency records belong to the caller: the primary key becomes
-- (key_id, scope, idempotency_key), so two API keys never see each other's answers.
-- Rows stored before this migration get key_id '' (no key id is empty). The service lets the
-- keys of API_KEYS (the only keys there were) still replay them until they expire, so a retry
-- that spans the upgrade is answered as before. The default stays, so a replica of the
-- previous version still inserting without key_id during a rolling upgrade keeps working;
-- its rows are legacy rows too. Adding a column with a constant default rewrites nothing;
-- the primary key is rebuilt over at most a TTL's worth of rows.
-- migration-safety: access-exclusive: a constant default rewrites nothing; the two statements after it rebuild the primary key over at most a TTL's worth of rows, under the same lock
alter table idempotency_records add column key_id text not null default '';
alter table idempotency_records drop constraint idempotency_records_pkey;
alter table idempotency_records add constraint idempotency_records_pkey primary key (key_id, scope, idempotency_key);

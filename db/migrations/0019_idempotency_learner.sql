-- A stored answer names the learner it is about (users.client_uuid), so that an erasure finds
-- every answer about the learner whatever system the learner had when it was stored (a note
-- created, then deleted, before the learner moved to another system). Rows stored before this
-- release, or by a replica of the previous release during a rolling upgrade, have none: the
-- erasure still finds those by what their JSON names.
-- migration-safety: access-exclusive: a nullable column without a default changes only the catalog: held for milliseconds
alter table idempotency_records add column learner_uuid uuid;
-- Every existing row has no learner, so the partial index holds nothing yet; building it reads
-- at most a TTL's worth of rows under a SHARE lock (writes wait for that scan, reads do not).
create index idempotency_records_learner on idempotency_records (learner_uuid) where learner_uuid is not null;

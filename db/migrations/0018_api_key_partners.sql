-- Every stored key belongs to a partner: the configured key (API_KEYS or API_KEYS_FILE) at the
-- root of the chain of creators. Key ids compare without case. A key never outlives, and is
-- never left usable by, the key that created it. The audit keeps the server's request id, and a
-- client's X-Request-Id beside it. Expand only: the previous release inserts keys without a
-- partner (read as their creator, see src/repositories/api-keys.ts) and audit rows without the
-- client's id, and ignores both columns. Partner keys are few (rows in the thousands at most),
-- so the backfills below are single statements.
-- migration-safety: access-exclusive: a nullable column only changes the catalog: held for milliseconds
alter table api_keys add column partner text;

-- migration-safety: access-exclusive: a nullable column only changes the catalog: held for milliseconds
alter table admin_audit add column client_request_id text;

-- The partner of each key: its root creator, the first created_by that is not a stored key.
with recursive chain (id, partner) as (
  select k.id, k.created_by from api_keys k
  where not exists (select 1 from api_keys p where p.id = k.created_by)
  union all
  select k.id, c.partner from api_keys k join chain c on k.created_by = c.id
)
update api_keys k set partner = chain.partner from chain where chain.id = k.id;

-- A key created before the rule expires no later than its creator (least() skips nulls).
with recursive life (id, expires_at) as (
  select k.id, k.expires_at from api_keys k
  where not exists (select 1 from api_keys p where p.id = k.created_by)
  union all
  select k.id, least(k.expires_at, l.expires_at) from api_keys k join life l on k.created_by = l.id
)
update api_keys k set expires_at = life.expires_at
from life where life.id = k.id and life.expires_at is distinct from k.expires_at;

-- A key whose creator (or its creator, ...) is revoked is revoked with it, and the audit says so.
with recursive gone (id, revoked_at, by_key) as (
  select k.id, k.revoked_at, k.id from api_keys k where k.revoked_at is not null
  union all
  select k.id, g.revoked_at, g.by_key from api_keys k join gone g on k.created_by = g.id
  where k.revoked_at is null
),
revoked as (
  update api_keys k set revoked_at = g.revoked_at
  from (select distinct on (id) id, revoked_at, by_key from gone order by id, revoked_at) g
  where g.id = k.id and k.revoked_at is null
  returning k.id, g.by_key
)
insert into admin_audit (actor_key_id, action, target_key_id, request_id)
select by_key, 'key.revoke', id, 'schema-migration' from revoked;

-- Ids compare without case: `ROOT` is taken when `root` is. Ids that already differ only by case
-- stop the upgrade with their names (an operator revokes the unwanted ones and deletes their rows
-- from api_key_secrets and api_keys, then starts again), rather than with the index's bare error.
do $$
declare
  clashes text;
begin
  select string_agg(id, ', ' order by id) into clashes
  from api_keys a where exists (select 1 from api_keys b where lower(b.id) = lower(a.id) and b.id <> a.id);
  if clashes is not null then
    raise exception 'api_keys ids that differ only by case: %; keep one of each before upgrading', clashes;
  end if;
end $$;
create unique index api_keys_id_lower on api_keys (lower(id));
-- The keys a key created (revocation reaches them) and a partner's keys in list order.
create index api_keys_created_by on api_keys (created_by);
create index api_keys_partner on api_keys (partner, created_at, id);

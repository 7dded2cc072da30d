-- Partner keys as data, managed through the admin operations (scope keys:admin). A key holds
-- what it may do; its secrets are stored only as SHA-256 digests (a roll adds one and gives the
-- old one an expiry). Every admin action leaves an audit row: who, what, on which key, when,
-- under which request id; never a secret or a digest. New tables only: nothing that runs
-- during a rolling upgrade reads or writes them before this version does.
create table api_keys (
  id text primary key,
  -- the first characters of the current secret, to recognise a key in a list (never enough to use it)
  prefix text not null,
  scopes text[] not null,
  -- null: every system; else lower-case system_uuids
  systems uuid[],
  rate_limit_max integer,
  rate_limit_window_ms integer,
  max_concurrent_requests integer,
  max_body_bytes_in_flight bigint,
  created_at timestamptz not null default now(),
  created_by text not null,
  expires_at timestamptz,
  revoked_at timestamptz,
  -- hour resolution, written at most once per key and hour by each replica
  last_used_at timestamptz,
  check ((rate_limit_max is null) = (rate_limit_window_ms is null))
);

create table api_key_secrets (
  -- SHA-256 of the secret (32 bytes)
  digest bytea primary key,
  key_id text not null references api_keys (id),
  created_at timestamptz not null default now(),
  -- null: until the key itself expires or is revoked; set when a roll replaces this secret
  expires_at timestamptz
);
create index api_key_secrets_key_id on api_key_secrets (key_id);

create table admin_audit (
  audit_id bigint generated always as identity primary key,
  at timestamptz not null default now(),
  actor_key_id text not null,
  -- key.create, key.roll or key.revoke
  action text not null,
  target_key_id text not null,
  request_id text not null
);
create index admin_audit_target on admin_audit (target_key_id, audit_id);

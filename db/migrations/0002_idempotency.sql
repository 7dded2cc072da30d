-- Stored answers of successful idempotent writes, per (scope, key). A row is inserted and
-- completed inside the business transaction, so other sessions only ever see finished rows.
create table idempotency_records (
  scope text not null,
  idempotency_key text not null,
  request_hash text not null,
  status_code smallint,
  response_body jsonb,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  primary key (scope, idempotency_key)
);
create index idempotency_records_expires_at on idempotency_records (expires_at);

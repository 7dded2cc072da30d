-- Learners. The natural key (system_user_id, system_uuid) is unique; system_uuid may be cleared.
create table users (
  client_uuid uuid primary key default gen_random_uuid(),
  system_user_id text not null check (char_length(system_user_id) between 1 and 36),
  system_uuid uuid,
  full_name text not null check (char_length(full_name) between 1 and 255),
  username text check (char_length(username) <= 255),
  timezone text not null default 'UTC',
  is_row_invalid smallint not null default 0 check (is_row_invalid in (0, 1)),
  invalidation_reason_uuid uuid,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint users_system_key unique (system_user_id, system_uuid)
);

-- Learning mistakes, newest first per user, optionally linked to one of the user's conspectuses.
create table error_logs (
  error_log_uuid uuid primary key default gen_random_uuid(),
  user_id uuid not null references users (client_uuid) on delete cascade,
  conspectus_uuid uuid references conspectuses (conspectus_uuid) on delete set null,
  message text not null check (char_length(message) between 1 and 2000),
  context jsonb check (context is null or jsonb_typeof(context) = 'object'),
  created_at timestamptz not null default clock_timestamp()
);

-- Keyset pages: (user, created_at desc, error_log_uuid desc), with and without the link filter.
create index error_logs_page on error_logs (user_id, created_at desc, error_log_uuid desc);
create index error_logs_by_conspectus on error_logs (user_id, conspectus_uuid, created_at desc, error_log_uuid desc)
  where conspectus_uuid is not null;

-- Study notes on the Leitner ladder. Owned by a user through client_uuid, so they follow the
-- user when its system_uuid moves.
create table conspectuses (
  conspectus_uuid uuid primary key default gen_random_uuid(),
  user_id uuid not null references users (client_uuid) on delete cascade,
  title text check (char_length(title) <= 200),
  cue_sheet jsonb not null check (jsonb_typeof(cue_sheet) = 'object'),
  dense_paragraph text not null check (char_length(dense_paragraph) between 1 and 20000),
  bullets text[] not null default '{}',
  slot char(1) not null default 'A' check (slot in ('A', 'B', 'C', 'D')),
  next_review_at timestamptz not null,
  last_reviewed_at timestamptz,
  review_count integer not null default 0 check (review_count >= 0),
  created_at timestamptz not null,
  updated_at timestamptz not null
);

-- Serves the due list (owner, next_review_at <= as_of, ordered, limited) with an index range
-- scan, and the schedule summary as an index-only scan (slot is included).
create index conspectuses_due on conspectuses (user_id, next_review_at, conspectus_uuid) include (slot);

-- A note's schedule policy: the Leitner ladder (every note before this) or FSRS, with the FSRS
-- memory state kept on the note. Expand only: the previous release inserts notes without the new
-- columns (they default to a Leitner note) and reads none of them.
-- migration-safety: access-exclusive: nullable columns and one constant default change the catalogue only; the checks are added NOT VALID (no scan) and validated below under a weaker lock
alter table conspectuses
  add column schedule_policy text not null default 'leitner',
  add column desired_retention double precision,
  add column fsrs_state text,
  add column fsrs_stability double precision,
  add column fsrs_difficulty double precision,
  add column fsrs_reps integer,
  add column fsrs_lapses integer,
  add constraint conspectuses_schedule_policy check (
    (schedule_policy = 'leitner' and desired_retention is null and fsrs_state is null and fsrs_stability is null
      and fsrs_difficulty is null and fsrs_reps is null and fsrs_lapses is null)
    or (schedule_policy = 'fsrs' and desired_retention between 0.70 and 0.97
      and fsrs_state in ('new', 'learning', 'review', 'relearning') and fsrs_stability >= 0
      and fsrs_difficulty >= 0 and fsrs_reps >= 0 and fsrs_lapses >= 0)
  ) not valid;

-- SHARE UPDATE EXCLUSIVE: reads and writes of notes go on while the rows are checked.
alter table conspectuses validate constraint conspectuses_schedule_policy;

-- Every review, appended: the note's state before and after, whichever the policy. It is the
-- learner's data (exported, erased with the learner) and what a fit of FSRS's weights reads.
-- A deleted note takes its reviews with it.
create table review_logs (
  review_uuid uuid primary key default gen_random_uuid(),
  user_id uuid not null,
  conspectus_uuid uuid not null references conspectuses (conspectus_uuid) on delete cascade,
  reviewed_at timestamptz not null,
  outcome text not null check (outcome in ('remembered', 'forgot')),
  schedule_policy text not null check (schedule_policy in ('leitner', 'fsrs')),
  -- Whole study days (the day rolls over at 04:00 in the learner's zone).
  elapsed_days integer not null check (elapsed_days >= 0),
  scheduled_days integer not null check (scheduled_days >= 0),
  slot_before char(1) not null,
  slot_after char(1) not null,
  next_review_before timestamptz not null,
  next_review_after timestamptz not null,
  -- FSRS notes: {state, stability, difficulty, reps, lapses}; null for a Leitner note.
  memory_before jsonb,
  memory_after jsonb
);

-- The learner's reviews in time order (export, erasure), and a note's (the cascade of its delete).
create index review_logs_user on review_logs (user_id, reviewed_at, review_uuid);
create index review_logs_note on review_logs (conspectus_uuid);

// A note's schedule policy, whichever it is: where a new note starts and where a review moves
// it. The service's handlers and the scheduler simulation (bench/scheduler.ts) both call these.
import { DEFAULT_DESIRED_RETENTION, type FsrsMemory, fsrsReview, NEW_MEMORY } from './fsrs.js'
import {
  FIRST_SLOT,
  INTERVAL_DAYS,
  nextReviewAt,
  type ReviewOutcome,
  reviewMoves,
  type Slot,
  studyDayNumber,
} from './leitner.js'

export type SchedulePolicy = 'leitner' | 'fsrs'

/** What a policy reads of a note. */
export interface ScheduledNote {
  schedule_policy: SchedulePolicy
  slot: Slot
  desired_retention: number | null
  memory: FsrsMemory | null
  last_reviewed_at: Date | string | null
  created_at: Date | string
}

/** Where a review moved a note: its slot and due time (ISO 8601), and for an fsrs note its memory. */
export interface ReviewMove {
  slot: Slot
  next_review_at: string
  memory: FsrsMemory | null
}

/** What the review log keeps of a review beside the note's state before and after. */
export interface ReviewFacts {
  outcome: ReviewOutcome
  schedule_policy: SchedulePolicy
  /** Whole study days since the last review (since creation before the first; 0 for an fsrs note's first). */
  elapsed_days: number
  /** Whole study days until the next review. */
  scheduled_days: number
}

/** A new note's schedule: slot A, due the next study day at 04:00 local, whichever the policy. */
export function newNoteSchedule(
  policy: SchedulePolicy,
  desiredRetention: number | undefined,
  at: Date,
  timeZone: string,
) {
  const fsrs = policy === 'fsrs'
  return {
    schedule_policy: policy,
    slot: FIRST_SLOT,
    next_review_at: nextReviewAt(at, FIRST_SLOT, timeZone),
    desired_retention: fsrs ? (desiredRetention ?? DEFAULT_DESIRED_RETENTION) : null,
    memory: fsrs ? { ...NEW_MEMORY } : null,
  }
}

/** Where a review at `at` moves the note, by its policy, and what the review log keeps of it. */
export function decideReview(
  note: ScheduledNote,
  outcome: ReviewOutcome,
  at: Date,
  timeZone: string,
): { move: ReviewMove; facts: ReviewFacts } {
  if (note.schedule_policy === 'fsrs') {
    const review = fsrsReview(
      note.memory ?? NEW_MEMORY,
      note.last_reviewed_at === null ? null : new Date(note.last_reviewed_at),
      outcome,
      at,
      timeZone,
      note.desired_retention ?? DEFAULT_DESIRED_RETENTION,
    )
    return {
      move: { slot: review.slot, next_review_at: review.next_review_at.toISOString(), memory: review.memory },
      facts: {
        outcome,
        schedule_policy: 'fsrs',
        elapsed_days: review.elapsed_days,
        scheduled_days: review.scheduled_days,
      },
    }
  }
  const move = reviewMoves(outcome, at, timeZone)[note.slot]
  const since = new Date(note.last_reviewed_at ?? note.created_at)
  return {
    move: { slot: move.slot, next_review_at: move.next_review_at, memory: null },
    facts: {
      outcome,
      schedule_policy: 'leitner',
      elapsed_days: Math.max(0, studyDayNumber(at, timeZone) - studyDayNumber(since, timeZone)),
      scheduled_days: INTERVAL_DAYS[move.slot],
    },
  }
}

// The FSRS schedule policy: pure functions, no SQL, no HTTP. The memory model and the intervals
// are ts-fsrs's (FSRS-6, default weights); this module only feeds it and reads its answer.
//
// - Study days, not instants: ts-fsrs counts elapsed days between UTC calendar dates, so it is
//   given noon UTC of each event's study day (src/schedule/leitner.ts: the day rolls over at
//   04:00 local). Its elapsed and scheduled days are then whole study days in the learner's zone,
//   and the due time is 04:00 local on the study day `scheduled_days` after the review's, as for
//   a Leitner note, daylight saving included.
// - Day-based: short-term (minute) learning steps are off, so every answer is at least a day.
// - Deterministic: no interval fuzz, so the same reviews give the same due times.
// - `forgot` is FSRS's Again and `remembered` its Good; the contract has no Hard or Easy.
import { type Card, fsrs, type FSRS, Rating, State } from 'ts-fsrs'
import { dueDaysAfter, type ReviewOutcome, type Slot, studyDayNumber } from './leitner.js'

export const DEFAULT_DESIRED_RETENTION = 0.9
export const MIN_DESIRED_RETENTION = 0.7
export const MAX_DESIRED_RETENTION = 0.97
/** ts-fsrs's default: 100 years. */
export const MAXIMUM_INTERVAL_DAYS = 36_500

/**
 * The slot an FSRS note reports: its stability band, so that the due list, the slot filter and
 * the schedule summary read the same for both policies. Stability is the interval, in days, at
 * which recall falls to 90 %: A < 3 days, B < 10, C < 30, D ≥ 30 (a new note, stability 0, is A).
 */
export const STABILITY_BANDS: readonly { slot: Slot; below: number }[] = [
  { slot: 'A', below: 3 },
  { slot: 'B', below: 10 },
  { slot: 'C', below: 30 },
  { slot: 'D', below: Number.POSITIVE_INFINITY },
]

export function stabilityBand(stability: number): Slot {
  for (const band of STABILITY_BANDS) if (stability < band.below) return band.slot
  return 'D'
}

export type MemoryState = 'new' | 'learning' | 'review' | 'relearning'

/** What FSRS keeps about a note between reviews (the last review's time is the note's last_reviewed_at). */
export interface FsrsMemory {
  state: MemoryState
  stability: number
  difficulty: number
  reps: number
  lapses: number
}

export const NEW_MEMORY: Readonly<FsrsMemory> = Object.freeze({
  state: 'new',
  stability: 0,
  difficulty: 0,
  reps: 0,
  lapses: 0,
})

const STATE_NAMES: Record<State, MemoryState> = {
  [State.New]: 'new',
  [State.Learning]: 'learning',
  [State.Review]: 'review',
  [State.Relearning]: 'relearning',
}
const STATES: Record<MemoryState, State> = {
  new: State.New,
  learning: State.Learning,
  review: State.Review,
  relearning: State.Relearning,
}

const GRADES = { forgot: Rating.Again, remembered: Rating.Good } as const satisfies Record<ReviewOutcome, Rating>

// One scheduler per desired retention (its parameters are fixed at construction). Bounded: a
// learner's notes use a few values; past the bound the map starts again.
const SCHEDULERS_KEPT = 64
const schedulers = new Map<number, FSRS>()

/** The ts-fsrs scheduler this policy uses for a desired retention (exported for the tests and the simulation). */
export function schedulerFor(desiredRetention: number): FSRS {
  let scheduler = schedulers.get(desiredRetention)
  if (!scheduler) {
    if (schedulers.size >= SCHEDULERS_KEPT) schedulers.clear()
    scheduler = fsrs({
      request_retention: desiredRetention,
      maximum_interval: MAXIMUM_INTERVAL_DAYS,
      enable_fuzz: false,
      enable_short_term: false,
    })
    schedulers.set(desiredRetention, scheduler)
  }
  return scheduler
}

const DAY_MS = 86_400_000
/** Noon UTC of a study day: the instant ts-fsrs is given for it (any hour of that UTC date would do). */
export const studyNoon = (dayNumber: number) => new Date(dayNumber * DAY_MS + DAY_MS / 2)

export interface FsrsReview {
  memory: FsrsMemory
  slot: Slot
  next_review_at: Date
  /** Study days since the last review (0 for a note never reviewed). */
  elapsed_days: number
  /** Study days from this review to the next. */
  scheduled_days: number
}

/**
 * A review of an FSRS note at `at`: its memory after the outcome, its band and its next due time.
 * `lastReviewedAt` is the previous review (null before the first).
 */
export function fsrsReview(
  memory: FsrsMemory,
  lastReviewedAt: Date | null,
  outcome: ReviewOutcome,
  at: Date,
  timeZone: string,
  desiredRetention: number,
): FsrsReview {
  const today = studyDayNumber(at, timeZone)
  const card: Card = {
    due: studyNoon(today),
    stability: memory.stability,
    difficulty: memory.difficulty,
    elapsed_days: 0,
    scheduled_days: 0,
    learning_steps: 0,
    reps: memory.reps,
    lapses: memory.lapses,
    state: STATES[memory.state],
    last_review: lastReviewedAt ? studyNoon(studyDayNumber(lastReviewedAt, timeZone)) : undefined,
  }
  const next = schedulerFor(desiredRetention).next(card, studyNoon(today), GRADES[outcome])
  const after: FsrsMemory = {
    state: STATE_NAMES[next.card.state],
    stability: next.card.stability,
    difficulty: next.card.difficulty,
    reps: next.card.reps,
    lapses: next.card.lapses,
  }
  return {
    memory: after,
    slot: stabilityBand(after.stability),
    next_review_at: dueDaysAfter(at, next.card.scheduled_days, timeZone),
    elapsed_days: next.log.elapsed_days,
    scheduled_days: next.card.scheduled_days,
  }
}

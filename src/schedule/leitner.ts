// The review schedule policy: pure functions, no SQL, no HTTP.
// Leitner ladder A -> B -> C -> D with intervals of 1, 3, 7 and 21 days. Due times are
// day-based in the learner's IANA time zone: the day rolls over at 04:00 local time, and a
// conspectus falls due at 04:00 local on the day `interval(slot)` days after the event's
// local day. Wall-clock arithmetic goes through Intl, so daylight-saving changes never move
// the due time off 04:00 local.

export type Slot = 'A' | 'B' | 'C' | 'D'
export type ReviewOutcome = 'remembered' | 'forgot'

export const SLOTS: readonly Slot[] = ['A', 'B', 'C', 'D']
export const INTERVAL_DAYS: Readonly<Record<Slot, number>> = { A: 1, B: 3, C: 7, D: 21 }
export const DAY_ROLLOVER_HOUR = 4
export const FIRST_SLOT: Slot = 'A'

/** remembered: one slot up (D stays D); forgot: back to A. */
export function nextSlot(slot: Slot, outcome: ReviewOutcome): Slot {
  if (outcome === 'forgot') return FIRST_SLOT
  return SLOTS[Math.min(SLOTS.indexOf(slot) + 1, SLOTS.length - 1)]!
}

interface WallClock {
  year: number
  month: number // 1..12
  day: number
  hour: number
  minute: number
  second: number
}

interface ZoneClock {
  format: Intl.DateTimeFormat
  /** The wall-clock fields in the order the formatter prints them. */
  order: (keyof WallClock)[]
}

// One per zone, keyed case-folded as Intl matches zone names: bounded by the zone database.
const clocks = new Map<string, ZoneClock>()
const NOT_A_FIELD = new Set(['literal', 'era'])

function zoneClock(timeZone: string): ZoneClock {
  const key = timeZone.toLowerCase()
  let clock = clocks.get(key)
  if (!clock) {
    const format = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    })
    const order = format
      .formatToParts(0)
      .filter((p) => !NOT_A_FIELD.has(p.type))
      .map((p) => p.type as keyof WallClock)
    clock = { format, order }
    clocks.set(key, clock)
  }
  return clock
}

const DIGIT_RUNS = /\d+/g

/** The zone's wall clock at `instant` (exported for its test). */
export function wallClock(instant: number, timeZone: string): WallClock {
  const { format, order } = zoneClock(timeZone)
  const fields: Partial<WallClock> = {}
  // format() and its digit runs, in the order formatToParts showed once: a third of the cost of
  // formatToParts, which builds an object per part (a review reads the clock ten times). Output
  // of any other shape is read through formatToParts.
  const runs = format.format(instant).match(DIGIT_RUNS)
  if (runs?.length === order.length) {
    for (let i = 0; i < order.length; i++) fields[order[i]!] = Number(runs[i])
  } else {
    for (const p of format.formatToParts(instant))
      if (!NOT_A_FIELD.has(p.type)) fields[p.type as keyof WallClock] = Number(p.value)
  }
  return {
    year: fields.year!,
    month: fields.month!,
    day: fields.day!,
    hour: fields.hour!,
    minute: fields.minute!,
    second: fields.second!,
  }
}

/** Offset of the zone from UTC at `instant`, in milliseconds (local = UTC + offset; exported for its test). */
export function offsetAt(instant: number, timeZone: string): number {
  return offsetOf(wallClock(instant, timeZone), instant)
}

/** The offset a wall clock read at `instant` shows (to the second, as the clock reads). */
function offsetOf(w: WallClock, instant: number): number {
  return Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second) - Math.floor(instant / 1000) * 1000
}

/**
 * The instant at which the wall clock in `timeZone` shows the given local date and time.
 * `offsetHint`, the zone's offset at an instant nearby, is tried first: when the zone has that
 * offset at the instant it gives, that instant is the answer, found with one clock read (most due
 * times are days, not a daylight-saving change, away from their event).
 */
export function zonedInstant(
  year: number,
  month: number,
  day: number,
  hour: number,
  timeZone: string,
  offsetHint?: number,
): Date {
  const wall = Date.UTC(year, month - 1, day, hour)
  if (offsetHint !== undefined && offsetAt(wall - offsetHint, timeZone) === offsetHint)
    return new Date(wall - offsetHint)
  // Two passes settle the offset on both sides of a transition.
  let instant = wall - offsetAt(wall, timeZone)
  instant = wall - offsetAt(instant, timeZone)
  const check = wallClock(instant, timeZone)
  if (check.hour !== hour) {
    // The local hour does not exist (a spring-forward gap): the offset before the change puts it
    // that far past the change, so the hour that starts the gap maps to the first instant after it.
    const before = Math.min(offsetAt(instant - 12 * 3_600_000, timeZone), offsetAt(instant + 12 * 3_600_000, timeZone))
    instant = wall - before
  }
  return new Date(instant)
}

type CalendarDay = { readonly year: number; readonly month: number; readonly day: number }

/** A study day and the zone's offset at the instant it was read from. */
interface StudyDay extends CalendarDay {
  readonly offset: number
}

/** 04:00 local on the day `days` days after `day`. */
function rolloverAfter(day: StudyDay, days: number, timeZone: string): number {
  const date = new Date(Date.UTC(day.year, day.month - 1, day.day + days))
  return zonedInstant(
    date.getUTCFullYear(),
    date.getUTCMonth() + 1,
    date.getUTCDate(),
    DAY_ROLLOVER_HOUR,
    timeZone,
    day.offset,
  ).getTime()
}

/** The local study day of an instant: before 04:00 local it still belongs to the previous day. */
export function studyDay(at: Date, timeZone: string): CalendarDay {
  const { year, month, day } = studyDayAndOffset(at, timeZone)
  return { year, month, day }
}

/** The study day and the zone's offset at `at`, from one clock read. */
function studyDayAndOffset(at: Date, timeZone: string): StudyDay {
  const w = wallClock(at.getTime(), timeZone)
  const date = new Date(Date.UTC(w.year, w.month - 1, w.day - (w.hour < DAY_ROLLOVER_HOUR ? 1 : 0)))
  return {
    year: date.getUTCFullYear(),
    month: date.getUTCMonth() + 1,
    day: date.getUTCDate(),
    offset: offsetOf(w, at.getTime()),
  }
}

/** When a conspectus now in `slot` falls due after an event (create or review) at `eventAt`. */
export function nextReviewAt(eventAt: Date, slot: Slot, timeZone: string): Date {
  return dueDaysAfter(eventAt, INTERVAL_DAYS[slot], timeZone)
}

/** 04:00 local on the study day `days` days after the study day of `eventAt` (the day rule of every policy). */
export function dueDaysAfter(eventAt: Date, days: number, timeZone: string): Date {
  return new Date(rolloverAfter(studyDayAndOffset(eventAt, timeZone), days, timeZone))
}

/** The study day of `at` as a count of days since 1970-01-01 (differences are whole study days). */
export function studyDayNumber(at: Date, timeZone: string): number {
  const { year, month, day } = studyDayAndOffset(at, timeZone)
  return Date.UTC(year, month - 1, day) / DAY_MS
}

/**
 * Where a review moves a conspectus, for each slot it may be in when its row is locked; due times
 * as ISO 8601 text, the form the store is sent (kept with the moves, so not formatted per review).
 */
export type ReviewMoves = Readonly<Record<Slot, Readonly<{ slot: Slot; next_review_at: string }>>>

/** A zone's moves for one outcome on one study day, and the instants that day spans. */
interface DayMoves {
  /** The study day's first instant (04:00 local) and the next day's, epoch ms. */
  from: number
  to: number
  moves: ReviewMoves
}

const DAY_MS = 86_400_000

// The moves are a function of (zone, outcome, study day): each zone and outcome keeps those of
// the last study day asked for. A review within that day's span (a day of exactly 24 hours: no
// clock change in it, so every instant of the span reads that day) takes them without reading the
// zone's clock; any other review computes them afresh. One entry per zone and outcome, bounded by
// the zone database; the moves are frozen, so no caller can change what another is given.
const lastDayMoves = new Map<string, DayMoves>()

/**
 * The policy's move for every slot, decided before the row is read: the store applies the one
 * for the slot it finds under its row lock (one statement, no read-then-write).
 */
export function reviewMoves(outcome: ReviewOutcome, at: Date, timeZone: string): ReviewMoves {
  const key = `${outcome} ${timeZone.toLowerCase()}`
  const instant = at.getTime()
  const known = lastDayMoves.get(key)
  if (known !== undefined && instant >= known.from && instant < known.to) return known.moves
  const day = studyDayAndOffset(at, timeZone)
  const due = dueBySlot(outcome, day, timeZone)
  const move = (from: Slot) => Object.freeze({ slot: nextSlot(from, outcome), next_review_at: due[from] })
  const moves: ReviewMoves = Object.freeze({ A: move('A'), B: move('B'), C: move('C'), D: move('D') })
  const from = rolloverAfter(day, 0, timeZone)
  const to = rolloverAfter(day, 1, timeZone)
  // A day with a clock change keeps no span: its reviews compute their moves each time.
  lastDayMoves.set(key, to - from === DAY_MS ? { from, to, moves } : { from: 0, to: 0, moves })
  return moves
}

/** Each slot's due instant after a review on `day`. */
function dueBySlot(outcome: ReviewOutcome, day: StudyDay, timeZone: string): Record<Slot, string> {
  // Several slots move to the same one (every slot on `forgot`): each due time is computed once.
  const due = new Map<Slot, string>()
  const dueFrom = (from: Slot) => {
    const slot = nextSlot(from, outcome)
    let at = due.get(slot)
    if (at === undefined) {
      at = new Date(rolloverAfter(day, INTERVAL_DAYS[slot], timeZone)).toISOString()
      due.set(slot, at)
    }
    return at
  }
  return { A: dueFrom('A'), B: dueFrom('B'), C: dueFrom('C'), D: dueFrom('D') }
}

// What each schedule policy buys, on simulated learners: the service's own scheduling code
// (src/schedule/policy.ts, as the review handler calls it; no HTTP, no database) decides when
// each note is due; a memory model it was not built on decides each recall.
//
// The learners' memory: half-life regression (Settles & Meeder, ACL 2016), the model Duolingo
// fitted to its learners. Recall after Δ days since the last exposure is p = 2^(-Δ/h), with the
// half-life h = 2^(θ·x) days, x = (1, √(1+right), √(1+wrong), note, learner):
//   log2 h = BIAS + W_RIGHT·√(1+right) + W_WRONG·√(1+wrong) + note_i + learner_j
// right/wrong count the note's recalls and lapses so far; every review, recalled or not, is an
// exposure (the learner sees the answer). Writing the note is the first exposure.
//
// Each learner studies NOTES notes, NEW_PER_DAY a day from day 0, for DAYS days; each day at a
// random hour of the evening they review every note due then, under one policy. The same learners
// (same seed: same notes, same study hours, same random draws per review) run under each policy.
// Reported per policy: reviews per note per year; the true recall (the model's p, not a coin
// toss) at review time; and on a random day (p of every note written so far, at noon each day).
//
// make bench-scheduler; BENCH_LEARNERS (default 25), BENCH_SEED. Writes bench/scheduler.md.
import type { FsrsMemory } from '../src/schedule/fsrs.js'
import { type Slot, zonedInstant } from '../src/schedule/leitner.js'
import { decideReview, newNoteSchedule, type SchedulePolicy } from '../src/schedule/policy.js'
import { writeResults } from './results-file.js'

const LEARNERS = Number(process.env.BENCH_LEARNERS ?? 25)
const SEED = Number(process.env.BENCH_SEED ?? 20_161_207)
const NOTES = 200
const DAYS = 365
const NEW_PER_DAY = 4
const START = Date.UTC(2026, 0, 5) // a Monday; the year crosses both daylight-saving changes
const ZONES = ['Europe/Berlin', 'America/New_York', 'Asia/Tokyo', 'Australia/Sydney']

// Half-life regression weights (days, base 2). A new note's median half-life is 2^(BIAS+W_RIGHT+W_WRONG) ≈ 2.3 days;
// ten recalls and no lapse take it to about 2^(BIAS+W_RIGHT·√11+W_WRONG) ≈ 60 days.
const BIAS = -0.2
const W_RIGHT = 2.0
const W_WRONG = -0.6
const NOTE_SD = 0.7 // a note's own ease, log2 days
const LEARNER_SD = 0.5 // a learner's memory, log2 days

const POLICIES: { label: string; policy: SchedulePolicy; retention?: number }[] = [
  { label: 'Leitner (1, 3, 7, 21 days)', policy: 'leitner' },
  { label: 'FSRS, desired retention 0.80', policy: 'fsrs', retention: 0.8 },
  { label: 'FSRS, desired retention 0.85', policy: 'fsrs', retention: 0.85 },
  { label: 'FSRS, desired retention 0.90', policy: 'fsrs', retention: 0.9 },
]

/** mulberry32: a small seeded generator, so every run draws the same learners. */
function generator(seed: number) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

/** A standard normal draw (Box-Muller). */
const normal = (random: () => number) => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random())

interface SimNote {
  ease: number
  created: number
  lastExposure: number
  right: number
  wrong: number
  // The note as the service keeps it.
  slot: Slot
  next: number
  memory: FsrsMemory | null
  lastReviewed: Date | null
}

const DAY_MS = 86_400_000
const halfLife = (learner: number, n: SimNote) =>
  2 ** (BIAS + W_RIGHT * Math.sqrt(1 + n.right) + W_WRONG * Math.sqrt(1 + n.wrong) + n.ease + learner)
const recallAt = (learner: number, n: SimNote, at: number) =>
  2 ** (-(at - n.lastExposure) / DAY_MS / halfLife(learner, n))

interface Totals {
  reviews: number
  noteDays: number
  recallAtReview: number
  recallOnDays: number
  dayChecks: number
  lapses: number
}

function simulateLearner(index: number, policy: SchedulePolicy, retention: number | undefined, totals: Totals) {
  // Each learner has its own stream, the same under every policy; recall draws come from a second.
  const random = generator(SEED + index * 7919)
  const draws = generator(SEED ^ (index * 104_729 + 1))
  const zone = ZONES[index % ZONES.length]!
  const learner = LEARNER_SD * normal(random)
  const eases = Array.from({ length: NOTES }, () => NOTE_SD * normal(random))
  const studyHours = Array.from({ length: DAYS }, () => 17 + 5 * random()) // 17:00 to 22:00 local
  const notes: SimNote[] = []
  for (let day = 0; day < DAYS; day++) {
    const date = new Date(START + day * DAY_MS)
    const hour = Math.floor(studyHours[day]!)
    const at =
      zonedInstant(date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate(), hour, zone).getTime() +
      (studyHours[day]! - hour) * 3_600_000
    const now = new Date(at)
    for (const n of notes) {
      if (n.next > at) continue
      const p = recallAt(learner, n, at)
      const recalled = draws() < p
      totals.reviews++
      totals.recallAtReview += p
      const { move } = decideReview(
        {
          schedule_policy: policy,
          slot: n.slot,
          desired_retention: retention ?? null,
          memory: n.memory,
          last_reviewed_at: n.lastReviewed,
          created_at: new Date(n.created),
        },
        recalled ? 'remembered' : 'forgot',
        now,
        zone,
      )
      n.slot = move.slot
      n.next = Date.parse(move.next_review_at)
      n.memory = move.memory
      n.lastReviewed = now
      n.lastExposure = at
      if (recalled) n.right++
      else {
        n.wrong++
        totals.lapses++
      }
    }
    if (notes.length < NOTES)
      for (let k = 0; k < NEW_PER_DAY && notes.length < NOTES; k++) {
        const schedule = newNoteSchedule(policy, retention, now, zone)
        notes.push({
          ease: eases[notes.length]!,
          created: at,
          lastExposure: at,
          right: 0,
          wrong: 0,
          slot: schedule.slot,
          next: schedule.next_review_at.getTime(),
          memory: schedule.memory,
          lastReviewed: null,
        })
      }
    // A random day's recall: every note written so far, at noon UTC of the next day.
    const noon = START + (day + 1) * DAY_MS + DAY_MS / 2
    for (const n of notes) {
      totals.recallOnDays += recallAt(learner, n, noon)
      totals.dayChecks++
    }
    totals.noteDays += notes.length
  }
}

const rows: string[] = []
const started = performance.now()
for (const { label, policy, retention } of POLICIES) {
  const t0 = performance.now()
  const totals: Totals = { reviews: 0, noteDays: 0, recallAtReview: 0, recallOnDays: 0, dayChecks: 0, lapses: 0 }
  for (let i = 0; i < LEARNERS; i++) simulateLearner(i, policy, retention, totals)
  const noteYears = totals.noteDays / DAYS
  const row = [
    label,
    (totals.reviews / noteYears).toFixed(1),
    (totals.recallAtReview / totals.reviews).toFixed(3),
    (totals.recallOnDays / totals.dayChecks).toFixed(3),
    (totals.lapses / noteYears).toFixed(1),
    ((performance.now() - t0) / 1000).toFixed(1),
  ]
  rows.push(`| ${row.join(' | ')} |`)
  console.log(row.join('  '))
}

const body = `${LEARNERS} simulated learners × ${NOTES} notes × ${DAYS} days under each policy (seed ${SEED}), computed
by the service's scheduling code (\`src/schedule/policy.ts\`: the Leitner ladder, and ts-fsrs with
default FSRS-6 weights, no fuzz, whole days, due at 04:00 local) in ${((performance.now() - started) / 1000).toFixed(1)} s.

| policy | reviews per note per year | true recall at review | true recall on a random day | lapses per note per year | seconds |
| --- | --- | --- | --- | --- | --- |
${rows.join('\n')}

The learners' memory is half-life regression (Settles & Meeder, ACL 2016), not FSRS's own model:
p = 2^(-Δ/h), log2 h = ${BIAS} + ${W_RIGHT}·√(1+right) ${W_WRONG}·√(1+wrong) + note + learner, with note ~ N(0, ${NOTE_SD}²) and learner
~ N(0, ${LEARNER_SD}²) in log2 days; every review is an exposure; writing the note is the first. Each learner writes
${NEW_PER_DAY} notes a day until it has ${NOTES}, and each evening (17:00 to 22:00) reviews every note then due; the simulator
draws each recall with probability p. "Reviews per note per year" divides all reviews by the note-years
held (a note written on day d is held for ${DAYS} − d days). "True recall at review" is the mean p at
the moments of review; "on a random day", the mean p of every note held, at noon of each day.
Learners live in ${ZONES.join(', ')}. FSRS was not fitted to these learners (default weights): a per-learner
fit from the review log would be the next step.
`
writeResults('scheduler', 'Schedule policies on simulated learners', 'make bench-scheduler', body)
console.log(`bench/scheduler.md written in ${((performance.now() - started) / 1000).toFixed(1)} s`)

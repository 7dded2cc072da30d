// A note's schedule policy on real PostgreSQL: a Leitner note and an FSRS note, each reviewed
// through the same outcomes across a daylight-saving change (New York, 2026-11-01), their due
// times checked against the ladder and against ts-fsrs called directly; every review in the
// learner's review log, in the export, and gone with the erasure. The expected study days and
// 04:00 wall-clock times are worked out here with Intl, not with the service's day rule.
import t from 'tap'
import { createEmptyCard, fsrs, Rating, type Card } from 'ts-fsrs'
import { buildTestApp } from '../helpers/app.js'
import { conspectusBody, createOwner, manualClock, type Owner, ownerQuery } from '../helpers/fixtures.js'

const ZONE = 'America/New_York'
const clock = manualClock('2026-10-20T15:00:00.000Z')
const api = await buildTestApp(t, {}, { now: clock.now })
const { sql } = api.db

const DAY_MS = 86_400_000
const local = new Intl.DateTimeFormat('en-CA', {
  timeZone: ZONE,
  hourCycle: 'h23',
  year: 'numeric',
  month: '2-digit',
  day: '2-digit',
  hour: '2-digit',
  minute: '2-digit',
})
/** "YYYY-MM-DD HH:MM" on New York's wall clock. */
const wall = (at: string | Date) => {
  const p = Object.fromEntries(local.formatToParts(new Date(at)).map((x) => [x.type, x.value]))
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}`
}
/** The study day (before 04:00 local it is still the previous day) as days since 1970-01-01. */
const studyDay = (at: string | Date) => {
  const [date, time] = wall(at).split(' ') as [string, string]
  const day = Date.parse(`${date}T00:00:00Z`) / DAY_MS
  return Number(time.slice(0, 2)) < 4 ? day - 1 : day
}
const dateOf = (day: number) => new Date(day * DAY_MS).toISOString().slice(0, 10)
/** Review-log entries of these notes, read from the table. */
const reviewsOf = async (...ids: string[]) =>
  (
    await sql<{ n: number }[]>`select count(*)::int as n from review_logs where conspectus_uuid = any(${ids}::uuid[])`
  )[0]!.n
const hoursAfter = (at: string, hours: number) => new Date(Date.parse(at) + hours * 3_600_000).toISOString()

const OUTCOMES = ['remembered', 'remembered', 'forgot', 'remembered', 'remembered', 'remembered'] as const
/** Hours after the due time at which each review happens: some late, one before 04:00 local (22 h after 04:00 is 02:00 next day). */
const LATENESS = [2, 22, 5, 0.5, 30, 3]

const reviewUrl = (id: string) => `/api/v1/conspectuses/${id}/actions/review`
const userUrl = (owner: Owner) => `/api/v1/user/${owner.system_uuid}/${encodeURIComponent(owner.system_user_id)}`

async function createNote(owner: Owner, extra: Record<string, unknown>) {
  clock.set('2026-10-20T15:00:00.000Z')
  const res = await api.post('/api/v1/conspectuses', conspectusBody(owner, extra))
  if (res.statusCode !== 201) throw new Error(`${res.statusCode} ${res.body}`)
  return res.json()
}

/** Reviews the note through OUTCOMES, each at its due time plus LATENESS; returns the answers. */
async function reviewAll(owner: Owner, note: { conspectus_uuid: string; next_review_at: string }) {
  const answers: Record<string, any>[] = []
  let due = note.next_review_at
  for (const [i, outcome] of OUTCOMES.entries()) {
    const at = hoursAfter(due, LATENESS[i]!)
    clock.set(at)
    const res = await api.post(reviewUrl(note.conspectus_uuid), { ...owner, outcome })
    if (res.statusCode !== 200) throw new Error(`${res.statusCode} ${res.body}`)
    answers.push({ ...res.json(), at })
    due = res.json().next_review_at
  }
  return answers
}

t.test('a note is leitner unless it asks; fsrs takes a desired retention; bad values are declared 4xx', async (t) => {
  const owner = await createOwner(api, { timezone: ZONE })
  const plain = await createNote(owner, {})
  t.match(plain, { schedule_policy: 'leitner', desired_retention: null, memory: null, slot: 'A' })
  const fsrsNote = await createNote(owner, { schedule_policy: 'fsrs' })
  t.match(fsrsNote, {
    schedule_policy: 'fsrs',
    desired_retention: 0.9,
    memory: { state: 'new', stability: 0, difficulty: 0, reps: 0, lapses: 0 },
    slot: 'A',
    next_review_at: plain.next_review_at,
  })
  t.equal((await createNote(owner, { schedule_policy: 'fsrs', desired_retention: 0.8 })).desired_retention, 0.8)
  const read = await api.get(`/api/v1/conspectuses/${fsrsNote.conspectus_uuid}?${ownerQuery(owner)}`)
  t.match(read.json(), { schedule_policy: 'fsrs', desired_retention: 0.9, memory: { state: 'new' } }, 'on every read')

  const refused = async (extra: Record<string, unknown>) => {
    const res = await api.post('/api/v1/conspectuses', conspectusBody(owner, extra))
    return [
      res.statusCode,
      res.json().code ??
        res
          .json()
          .errors?.map((e: { code: string }) => e.code)
          .join(),
    ]
  }
  t.same(await refused({ schedule_policy: 'sm2' }), [422, 'CONS_027'])
  t.same(await refused({ schedule_policy: 'fsrs', desired_retention: 0.5 }), [422, 'CONS_028'])
  t.same(await refused({ schedule_policy: 'fsrs', desired_retention: 0.98 }), [422, 'CONS_028'])
  t.same(await refused({ schedule_policy: 'fsrs', desired_retention: '0.9' }), [422, 'CONS_028'])
  t.same(await refused({ desired_retention: 0.9 }), [400, 'CONS_103'])
  t.same(await refused({ schedule_policy: 'leitner', desired_retention: 0.9 }), [400, 'CONS_103'])
})

t.test(
  'each policy through the same reviews across the change to standard time; the log, export and erasure',
  async (t) => {
    const owner = await createOwner(api, { timezone: ZONE })
    const leitner = await createNote(owner, {})
    const learner = await createNote(owner, { schedule_policy: 'fsrs', desired_retention: 0.9 })

    // Leitner: the ladder, each due time 04:00 local on the review's study day plus the interval.
    const INTERVALS = { A: 1, B: 3, C: 7, D: 21 } as const
    const ladder = await reviewAll(owner, leitner)
    let slot: keyof typeof INTERVALS = 'A'
    for (const [i, answer] of ladder.entries()) {
      slot = OUTCOMES[i] === 'forgot' ? 'A' : (['A', 'B', 'C', 'D'] as const)[Math.min('ABCD'.indexOf(slot) + 1, 3)]!
      t.equal(answer.slot, slot, `leitner review ${i + 1}: slot`)
      t.equal(
        wall(answer.next_review_at),
        `${dateOf(studyDay(answer.at) + INTERVALS[slot])} 04:00`,
        `leitner review ${i + 1}: due`,
      )
    }

    // FSRS: ts-fsrs called directly on the study days, the due time the same day rule.
    const scheduler = fsrs({
      request_retention: 0.9,
      maximum_interval: 36_500,
      enable_fuzz: false,
      enable_short_term: false,
    })
    let card: Card = createEmptyCard(new Date((studyDay(learner.created_at) + 0.5) * DAY_MS))
    const learned = await reviewAll(owner, learner)
    const band = (s: number) => (s < 3 ? 'A' : s < 10 ? 'B' : s < 30 ? 'C' : 'D')
    const expectedLog: Record<string, unknown>[] = []
    for (const [i, answer] of learned.entries()) {
      const before = card
      const today = studyDay(answer.at)
      const next = scheduler.next(
        card,
        new Date((today + 0.5) * DAY_MS),
        OUTCOMES[i] === 'forgot' ? Rating.Again : Rating.Good,
      )
      card = next.card
      t.ok(card.scheduled_days >= 1, 'whole days, at least one')
      t.equal(wall(answer.next_review_at), `${dateOf(today + card.scheduled_days)} 04:00`, `fsrs review ${i + 1}: due`)
      t.equal(answer.slot, band(card.stability), `fsrs review ${i + 1}: stability band`)
      t.same(
        answer.memory,
        {
          state: 'review',
          stability: card.stability,
          difficulty: card.difficulty,
          reps: card.reps,
          lapses: card.lapses,
        },
        `fsrs review ${i + 1}: memory as ts-fsrs has it`,
      )
      expectedLog.push({
        outcome: OUTCOMES[i],
        elapsed_days: next.log.elapsed_days,
        scheduled_days: card.scheduled_days,
        slot_after: band(card.stability),
        memory_before:
          i === 0 ? { state: 'new', stability: 0, difficulty: 0, reps: 0, lapses: 0 } : { stability: before.stability },
      })
    }
    t.equal(learned[3]!.memory.lapses, 1, 'the forgotten review is a lapse')
    t.not(ladder.at(-1)!.next_review_at, learned.at(-1)!.next_review_at, 'the two policies part ways')

    // The reviews straddle the change: offsets of the first and the last due time differ by an hour.
    const offset = (at: string) => Date.parse(`${wall(at).replace(' ', 'T')}:00Z`) - Date.parse(at)
    t.equal(offset(learned[0]!.next_review_at) - offset(learned.at(-1)!.next_review_at), 3_600_000)
    t.ok(
      learned.some((a) => Number(wall(a.at).slice(11, 13)) < 4),
      'one review before 04:00 local counts for the previous study day',
    )

    // The schedule summary and the due list read the band as a slot.
    const summary = (await api.get(`/api/v1/schedule/summary?${ownerQuery(owner)}&as_of=2026-10-20T16:00:00Z`)).json()
    t.equal(summary.total, 2)
    t.equal(summary.slots[band(card.stability)] >= 1, true)

    // The export holds every review, oldest first, with the state before and after.
    const exported = (await api.get(`${userUrl(owner)}/export`)).json()
    t.equal(exported.conspectuses.length, 2)
    t.match(
      exported.conspectuses.find((c: { schedule_policy: string }) => c.schedule_policy === 'fsrs'),
      {
        memory: learned.at(-1)!.memory,
      },
    )
    const logOf = (id: string) =>
      exported.review_logs.filter((r: { conspectus_uuid: string }) => r.conspectus_uuid === id)
    t.equal(exported.review_logs.length, OUTCOMES.length * 2)
    const fsrsLog = logOf(learner.conspectus_uuid)
    t.match(fsrsLog, expectedLog, 'the FSRS note: outcome, study days, band, memory before')
    t.same(
      fsrsLog.map((r: { reviewed_at: string; next_review_after: string }) => [r.reviewed_at, r.next_review_after]),
      learned.map((a) => [a.at, a.next_review_at]),
    )
    t.same(fsrsLog[1].memory_before, fsrsLog[0].memory_after, 'each entry starts where the last ended')
    const leitnerLog = logOf(leitner.conspectus_uuid)
    t.match(leitnerLog[0], {
      schedule_policy: 'leitner',
      slot_before: 'A',
      slot_after: 'B',
      scheduled_days: 3,
      elapsed_days: 1,
      next_review_before: leitner.next_review_at,
      memory_before: null,
      memory_after: null,
    })
    t.same(
      leitnerLog.map((r: { slot_after: string }) => r.slot_after),
      ladder.map((a) => a.slot),
    )

    // A replayed review moves nothing and logs nothing.
    const key = 'replayed-review'
    clock.set(hoursAfter(learned.at(-1)!.next_review_at, 1))
    const first = await api.post(reviewUrl(learner.conspectus_uuid), { ...owner, outcome: 'forgot' }, key)
    const again = await api.post(reviewUrl(learner.conspectus_uuid), { ...owner, outcome: 'forgot' }, key)
    t.equal(again.headers['idempotent-replayed'], 'true')
    t.same(again.json(), first.json())
    t.equal(await reviewsOf(learner.conspectus_uuid), OUTCOMES.length + 1, 'one entry per review, none for the replay')

    // Erased with the learner (its notes take their reviews with them).
    const erased = await api.request({ method: 'DELETE', url: userUrl(owner) })
    t.match(erased.json(), { deleted: true, erased: { conspectuses: 2 } })
    const ids = [leitner.conspectus_uuid, learner.conspectus_uuid]
    t.equal(await reviewsOf(...ids), 0, 'no review of the learner is left')
  },
)

t.test('deleting a note takes its reviews with it', async (t) => {
  const owner = await createOwner(api, { timezone: ZONE })
  const note = await createNote(owner, { schedule_policy: 'fsrs' })
  clock.set('2026-10-21T12:00:00.000Z')
  await api.post(reviewUrl(note.conspectus_uuid), { ...owner, outcome: 'remembered' })
  await api.request({ method: 'DELETE', url: `/api/v1/conspectuses/${note.conspectus_uuid}?${ownerQuery(owner)}` })
  t.equal(await reviewsOf(note.conspectus_uuid), 0)
})

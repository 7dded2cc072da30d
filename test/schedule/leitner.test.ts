// The schedule policy on its own: ladder moves and 04:00-local due times across time zones.
import t from 'tap'
import fc from 'fast-check'
import {
  INTERVAL_DAYS,
  nextReviewAt,
  nextSlot,
  offsetAt,
  reviewMoves,
  studyDay,
  wallClock,
  zonedInstant,
  type Slot,
} from '../../src/schedule/leitner.js'

const iso = (d: Date) => d.toISOString()

t.test('remembered climbs one slot and stays at D; forgot returns to A', async (t) => {
  t.same(
    (['A', 'B', 'C', 'D'] as Slot[]).map((s) => nextSlot(s, 'remembered')),
    ['B', 'C', 'D', 'D'],
  )
  t.same(
    (['A', 'B', 'C', 'D'] as Slot[]).map((s) => nextSlot(s, 'forgot')),
    ['A', 'A', 'A', 'A'],
  )
  t.same(INTERVAL_DAYS, { A: 1, B: 3, C: 7, D: 21 })
})

t.test('reviewMoves gives, for every slot a note may be in, the same move as nextSlot and nextReviewAt', async (t) => {
  const at = new Date('2026-03-08T05:30:00Z') // the New York spring-forward night
  // That night, a Berlin evening before its own change, 03:59 and 04:00 in Kathmandu (+05:45), and
  // a Chatham (+13:45) moment three weeks before its autumn change.
  const cases: [Date, string][] = [
    [at, 'America/New_York'],
    [new Date('2026-03-28T21:00:00Z'), 'Europe/Berlin'],
    [new Date('2026-06-30T22:14:00Z'), 'Asia/Kathmandu'],
    [new Date('2026-06-30T22:15:00Z'), 'Asia/Kathmandu'],
    [new Date('2026-03-15T12:00:00Z'), 'Pacific/Chatham'],
    [at, 'UTC'],
  ]
  for (const [when, zone] of cases) {
    for (const outcome of ['remembered', 'forgot'] as const) {
      const moves = reviewMoves(outcome, when, zone)
      for (const from of ['A', 'B', 'C', 'D'] as Slot[]) {
        const slot = nextSlot(from, outcome)
        t.same(
          moves[from],
          { slot, next_review_at: iso(nextReviewAt(when, slot, zone)) },
          `${zone} ${when.toISOString()}: ${outcome} from ${from}`,
        )
      }
    }
  }
  t.equal(
    reviewMoves('remembered', at, 'America/New_York').C.next_review_at,
    '2026-03-28T08:00:00.000Z',
    'C -> D: 21 days, 04:00 EDT',
  )
})

t.test(
  'reviewMoves, asked in any order across zones, days and daylight-saving changes, equals the policy computed afresh',
  async (t) => {
    // Each zone and outcome keeps the moves of its last study day; calls jumping between days,
    // back and forth, and across each zone's changes must never be answered with another day's.
    const zones = [
      'America/New_York',
      'Europe/Berlin',
      'Asia/Kathmandu',
      'Pacific/Chatham',
      'Australia/Lord_Howe',
      'UTC',
    ]
    const start = Date.parse('2026-03-01T00:00:00Z')
    const call = fc.record({
      zone: fc.constantFrom(...zones, 'europe/berlin'),
      // ten weeks in minutes, so that neighbouring calls often share or straddle a 04:00 rollover
      at: fc.integer({ min: 0, max: 70 * 24 * 60 }).map((minutes) => new Date(start + minutes * 60_000)),
      outcome: fc.constantFrom('remembered' as const, 'forgot' as const),
    })
    fc.assert(
      fc.property(fc.array(call, { minLength: 1, maxLength: 40 }), (calls) => {
        for (const { zone, at, outcome } of calls) {
          const moves = reviewMoves(outcome, at, zone)
          for (const from of ['A', 'B', 'C', 'D'] as Slot[]) {
            const slot = nextSlot(from, outcome)
            if (moves[from].slot !== slot || moves[from].next_review_at !== iso(nextReviewAt(at, slot, zone)))
              return false
          }
        }
        return true
      }),
      { numRuns: 300, seed: 20261128 },
    )
    const first = reviewMoves('remembered', new Date('2026-03-10T12:00:00Z'), 'UTC')
    t.throws(() => {
      ;(first as { A: { slot: string } }).A.slot = 'D'
    }, TypeError)
    t.throws(() => {
      ;(first as { A: unknown }).A = { slot: 'D', next_review_at: '' }
    }, TypeError)
    t.same(
      reviewMoves('remembered', new Date('2026-03-10T12:00:00Z'), 'UTC').A,
      { slot: 'B', next_review_at: '2026-03-13T04:00:00.000Z' },
      'a caller cannot change a returned move',
    )
    t.pass('300 random call sequences agree with the policy computed afresh')
  },
)

t.test('the moves kept for a study day end at its last millisecond', async (t) => {
  const zone = 'Europe/Berlin'
  const rollover = Date.parse('2026-06-10T02:00:00Z') // 04:00 summer time
  const fresh = (at: number) => iso(nextReviewAt(new Date(at), 'B', zone))
  for (const at of [rollover - 1, rollover, rollover - 1, rollover + 1, rollover])
    t.equal(reviewMoves('remembered', new Date(at), zone).A.next_review_at, fresh(at), `at ${iso(new Date(at))}`)
  t.not(fresh(rollover - 1), fresh(rollover), 'the two days differ')
  // The day clocks go back (25 hours long): each review computed afresh, on both sides of the change.
  const change = Date.parse('2026-10-25T01:00:00Z')
  for (const at of [change - 1, change, change + 3_600_000, change - 3_600_000])
    t.equal(reviewMoves('forgot', new Date(at), zone).B.next_review_at, iso(nextReviewAt(new Date(at), 'A', zone)))
})

t.test('the study day before clocks go forward lasts 23 hours: the next day starts an hour early', async (t) => {
  // Berlin: 2026-03-28 04:00 CET (03:00Z) to 2026-03-29 04:00 CEST (02:00Z). New York: 2026-03-07
  // 04:00 EST (09:00Z) to 2026-03-08 04:00 EDT (08:00Z).
  for (const [zone, dayStart, nextDayStart] of [
    ['Europe/Berlin', '2026-03-28T03:00:00Z', '2026-03-29T02:00:00Z'],
    ['America/New_York', '2026-03-07T09:00:00Z', '2026-03-08T08:00:00Z'],
  ] as const) {
    const start = Date.parse(dayStart)
    const next = Date.parse(nextDayStart)
    t.equal(next - start, 23 * 3_600_000, `${zone}: a 23-hour study day`)
    t.same(studyDay(new Date(next - 1), zone), studyDay(new Date(start), zone), 'its last millisecond')
    t.notSame(studyDay(new Date(next), zone), studyDay(new Date(start), zone), 'the next day from 04:00 local')
    // A review early in the short day first, then in the hour a 24-hour day would still cover.
    for (const at of [start + 3_600_000, next, next + 1_800_000, next + 3_600_000 - 1, next - 1])
      for (const outcome of ['remembered', 'forgot'] as const)
        t.equal(
          reviewMoves(outcome, new Date(at), zone).A.next_review_at,
          iso(nextReviewAt(new Date(at), outcome === 'remembered' ? 'B' : 'A', zone)),
          `${zone} ${outcome} at ${iso(new Date(at))}`,
        )
  }
})

t.test('due at 04:00 local on the day interval(slot) days after the event day', async (t) => {
  // 10:00 in Berlin (CET, UTC+1) on 2026-01-10
  const event = new Date('2026-01-10T09:00:00Z')
  t.equal(iso(nextReviewAt(event, 'A', 'Europe/Berlin')), '2026-01-11T03:00:00.000Z')
  t.equal(iso(nextReviewAt(event, 'B', 'Europe/Berlin')), '2026-01-13T03:00:00.000Z')
  t.equal(iso(nextReviewAt(event, 'C', 'Europe/Berlin')), '2026-01-17T03:00:00.000Z')
  t.equal(iso(nextReviewAt(event, 'D', 'Europe/Berlin')), '2026-01-31T03:00:00.000Z')
  t.equal(iso(nextReviewAt(event, 'A', 'UTC')), '2026-01-11T04:00:00.000Z')
})

t.test('an event before 04:00 local belongs to the previous study day', async (t) => {
  // 03:59 and 04:00 local in New York (EST, UTC-5) on 2026-01-15
  const before = new Date('2026-01-15T08:59:00Z')
  const at = new Date('2026-01-15T09:00:00Z')
  t.same(studyDay(before, 'America/New_York'), { year: 2026, month: 1, day: 14 })
  t.same(studyDay(at, 'America/New_York'), { year: 2026, month: 1, day: 15 })
  t.equal(
    iso(nextReviewAt(before, 'A', 'America/New_York')),
    '2026-01-15T09:00:00.000Z',
    'due the same calendar day at 04:00',
  )
  t.equal(iso(nextReviewAt(at, 'A', 'America/New_York')), '2026-01-16T09:00:00.000Z')
  // 00:30 local just after midnight still counts for the day before
  t.equal(iso(nextReviewAt(new Date('2026-01-16T05:30:00Z'), 'A', 'America/New_York')), '2026-01-16T09:00:00.000Z')
})

t.test('daylight-saving changes keep the due time at 04:00 local', async (t) => {
  // New York springs forward on 2026-03-08 (EST -5 -> EDT -4) and falls back on 2026-11-01.
  t.equal(iso(nextReviewAt(new Date('2026-03-07T15:00:00Z'), 'A', 'America/New_York')), '2026-03-08T08:00:00.000Z')
  t.equal(iso(nextReviewAt(new Date('2026-03-06T15:00:00Z'), 'B', 'America/New_York')), '2026-03-09T08:00:00.000Z')
  t.equal(iso(nextReviewAt(new Date('2026-10-31T15:00:00Z'), 'A', 'America/New_York')), '2026-11-01T09:00:00.000Z')
  t.equal(iso(nextReviewAt(new Date('2026-10-25T15:00:00Z'), 'C', 'America/New_York')), '2026-11-01T09:00:00.000Z')
  // Berlin: CET -> CEST on 2026-03-29, back on 2026-10-25.
  t.equal(iso(nextReviewAt(new Date('2026-03-28T12:00:00Z'), 'A', 'Europe/Berlin')), '2026-03-29T02:00:00.000Z')
  t.equal(iso(nextReviewAt(new Date('2026-03-22T12:00:00Z'), 'C', 'Europe/Berlin')), '2026-03-29T02:00:00.000Z')
  t.equal(iso(nextReviewAt(new Date('2026-10-24T12:00:00Z'), 'A', 'Europe/Berlin')), '2026-10-25T03:00:00.000Z')
  t.equal(iso(nextReviewAt(new Date('2026-10-04T12:00:00Z'), 'D', 'Europe/Berlin')), '2026-10-25T03:00:00.000Z')
})

t.test('far-east and far-west zones use their own calendar day', async (t) => {
  // Kiritimati is UTC+14, Pago Pago UTC-11: the same instant is on different local days.
  const instant = new Date('2026-06-01T12:00:00Z') // Kiritimati 2026-06-02 02:00 (before 04:00 -> day 06-01), Pago Pago 06-01 01:00 (-> day 05-31)
  t.equal(iso(nextReviewAt(instant, 'A', 'Pacific/Kiritimati')), '2026-06-01T14:00:00.000Z')
  t.equal(iso(nextReviewAt(instant, 'A', 'Pacific/Pago_Pago')), '2026-06-01T15:00:00.000Z')
  t.equal(
    iso(nextReviewAt(new Date('2026-06-01T20:00:00Z'), 'B', 'Asia/Kolkata')),
    '2026-06-03T22:30:00.000Z',
    'half-hour offsets: 01:30 IST counts for the day before',
  )
})

t.test('a learner who changes time zone is scheduled in the zone of the event', async (t) => {
  const reviewInTokyo = nextReviewAt(new Date('2026-05-10T01:00:00Z'), 'B', 'Asia/Tokyo') // 10:00 JST
  t.equal(iso(reviewInTokyo), '2026-05-12T19:00:00.000Z') // 2026-05-13 04:00 JST
  const nextInLondon = nextReviewAt(new Date('2026-05-13T09:00:00Z'), 'C', 'Europe/London') // 10:00 BST
  t.equal(iso(nextInLondon), '2026-05-20T03:00:00.000Z') // 2026-05-20 04:00 BST
})

// Zones that change their offset during 2026, in both hemispheres, some by half an hour.
const DAYLIGHT_SAVING_ZONES = [
  'America/New_York',
  'Europe/Berlin',
  'Australia/Lord_Howe',
  'America/Santiago',
  'Asia/Tehran',
  'Pacific/Chatham',
]

t.test('04:00 local is always the result, every day of a year in several zones', async (t) => {
  for (const zone of DAYLIGHT_SAVING_ZONES) {
    const fmt = new Intl.DateTimeFormat('en-GB', {
      timeZone: zone,
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    })
    let wrong = 0
    for (let d = 0; d < 366; d++) {
      const due = nextReviewAt(new Date(Date.UTC(2026, 0, 1, 13) + d * 86_400_000), 'A', zone)
      if (fmt.format(due) !== '04:00') wrong++
    }
    t.equal(wrong, 0, zone)
  }
})

t.test('the wall clock reads the same fields as formatToParts, hour by hour through a year', async (t) => {
  for (const zone of [
    'America/New_York',
    'Asia/Kathmandu',
    'Australia/Lord_Howe',
    'Pacific/Chatham',
    'UTC',
    'europe/berlin',
  ]) {
    const parts = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    })
    let differ = 0
    for (let h = 0; h < 366 * 24; h += 7) {
      const instant = Date.UTC(2026, 0, 1) + h * 3_600_000 + 1_234_000
      const expected = Object.fromEntries(
        parts
          .formatToParts(instant)
          .filter((p) => p.type !== 'literal')
          .map((p) => [p.type, Number(p.value)]),
      )
      if (
        JSON.stringify(wallClock(instant, zone)) !==
        JSON.stringify({
          year: expected.year,
          month: expected.month,
          day: expected.day,
          hour: expected.hour,
          minute: expected.minute,
          second: expected.second,
        })
      )
        differ++
    }
    t.equal(differ, 0, zone)
  }
})

t.test(
  'due times are memoized per zone, study day and slot without sharing Date objects or mixing zones',
  async (t) => {
    const event = new Date('2026-01-10T12:00:00Z')
    const first = nextReviewAt(event, 'A', 'Europe/Berlin')
    first.setTime(0) // a caller's change must not reach the memo
    t.equal(iso(nextReviewAt(event, 'A', 'Europe/Berlin')), '2026-01-11T03:00:00.000Z')
    t.equal(
      iso(nextReviewAt(event, 'A', 'europe/berlin')),
      '2026-01-11T03:00:00.000Z',
      'zone names are case-insensitive',
    )
    t.equal(
      iso(nextReviewAt(event, 'A', 'America/New_York')),
      '2026-01-11T09:00:00.000Z',
      'another zone, its own 04:00',
    )
    t.equal(
      iso(nextReviewAt(new Date('2026-01-11T12:00:00Z'), 'A', 'Europe/Berlin')),
      '2026-01-12T03:00:00.000Z',
      'the next study day',
    )
  },
)

t.test(
  'the study day known for a zone is the one its wall clock gives, minute by minute across offset changes',
  async (t) => {
    const byClock = (instant: number, zone: string) => {
      const w = wallClock(instant, zone)
      const date = new Date(Date.UTC(w.year, w.month - 1, w.day - (w.hour < 4 ? 1 : 0)))
      return `${date.getUTCFullYear()}-${date.getUTCMonth() + 1}-${date.getUTCDate()}`
    }
    // Spring and autumn changes; Lord Howe moves by 30 minutes, Chatham changes at 02:45/03:45
    // local, Troll by two hours.
    const changes: [string, string][] = [
      ['America/New_York', '2026-03-08'],
      ['America/New_York', '2026-11-01'],
      ['Europe/Berlin', '2026-03-29'],
      ['Europe/Berlin', '2026-10-25'],
      ['Australia/Lord_Howe', '2026-04-05'],
      ['Australia/Lord_Howe', '2026-10-04'],
      ['Pacific/Chatham', '2026-04-05'],
      ['Pacific/Chatham', '2026-09-27'],
      ['Antarctica/Troll', '2026-03-29'],
      ['Antarctica/Troll', '2026-10-25'],
    ]
    for (const [zone, date] of changes) {
      const from = Date.parse(`${date}T00:00:00Z`) - 2 * 86_400_000
      const instants = Array.from({ length: (4 * 24 * 60) / 10 }, (_, i) => from + i * 600_000 + 17_000)
      // In time order (the memo's usual case), then hopping by 257 steps (a prime: every instant
      // once, the memo replaced at almost every step).
      const shuffled = instants.map((_, i) => instants[(i * 257) % instants.length]!)
      let wrong = 0
      for (const instant of [...instants, ...shuffled]) {
        const day = studyDay(new Date(instant), zone)
        if (`${day.year}-${day.month}-${day.day}` !== byClock(instant, zone)) wrong++
      }
      t.equal(wrong, 0, `${zone} around ${date}`)
    }
  },
)

t.test('a due time found from the offset at its event is the one found without it', async (t) => {
  // Zones with daylight saving, half- and quarter-hour offsets, a date-line move (Apia, 2011),
  // Ramadan changes (Casablanca) and a local mean time of seconds (Amsterdam before 1937).
  const zones = [
    ...DAYLIGHT_SAVING_ZONES,
    'Pacific/Apia',
    'Asia/Kathmandu',
    'Africa/Casablanca',
    'America/St_Johns',
    'Europe/Amsterdam',
  ]
  const starts = [Date.UTC(2026, 0, 1, 13), Date.UTC(2011, 11, 1, 13), Date.UTC(1930, 0, 1, 13)]
  for (const zone of zones) {
    let differ = 0
    for (const start of starts) {
      for (let d = 0; d < 366; d += 2) {
        const event = start + d * 86_400_000
        const hint = offsetAt(event, zone)
        for (const days of [1, 3, 7, 21]) {
          const local = new Date(event + hint + days * 86_400_000)
          const args = [local.getUTCFullYear(), local.getUTCMonth() + 1, local.getUTCDate(), 4, zone] as const
          if (zonedInstant(...args, hint).getTime() !== zonedInstant(...args).getTime()) differ++
        }
      }
    }
    t.equal(differ, 0, zone)
  }
  // A local time that does not exist (New York, 2026-03-08 02:00), hinted from either side.
  const gap = zonedInstant(2026, 3, 8, 2, 'America/New_York')
  t.equal(iso(zonedInstant(2026, 3, 8, 2, 'America/New_York', -5 * 3_600_000)), iso(gap))
  t.equal(iso(zonedInstant(2026, 3, 8, 2, 'America/New_York', -4 * 3_600_000)), iso(gap))
})

t.test('a local hour inside a spring-forward gap maps to the first instant after the gap', async (t) => {
  // New York 2026-03-08: 02:00 EST is followed by 03:00 EDT (07:00Z).
  t.equal(iso(zonedInstant(2026, 3, 8, 2, 'America/New_York')), '2026-03-08T07:00:00.000Z')
  // Lord Howe 2026-10-04: 02:00 (+10:30) is followed by 02:30 (+11), at 15:30Z the day before.
  t.equal(iso(zonedInstant(2026, 10, 4, 2, 'Australia/Lord_Howe')), '2026-10-03T15:30:00.000Z')
  // An hour that exists is left alone: 01:00 and 03:00 New York that morning.
  t.equal(iso(zonedInstant(2026, 3, 8, 1, 'America/New_York')), '2026-03-08T06:00:00.000Z')
  t.equal(iso(zonedInstant(2026, 3, 8, 3, 'America/New_York')), '2026-03-08T07:00:00.000Z')
})

// The FSRS policy's pure parts: the stability band, study days as ts-fsrs's days (a review
// before 04:00 local belongs to the previous day), and due times at 04:00 local across the
// change to summer time.
import t from 'tap'
import { fsrs, Rating, State } from 'ts-fsrs'
import { fsrsReview, NEW_MEMORY, stabilityBand } from '../../src/schedule/fsrs.js'

const BERLIN = 'Europe/Berlin'
const scheduler = fsrs({
  request_retention: 0.9,
  maximum_interval: 36_500,
  enable_fuzz: false,
  enable_short_term: false,
})
const noon = (date: string) => new Date(`${date}T12:00:00Z`)

t.test('the band: A < 3 days, B < 10, C < 30, D from 30', async (t) => {
  t.same([0, 2.99, 3, 9.99, 10, 29.99, 30, 400].map(stabilityBand), ['A', 'A', 'B', 'B', 'C', 'C', 'D', 'D'])
})

t.test('a first review: ts-fsrs on a new card, due 04:00 local that many days on', async (t) => {
  const review = fsrsReview(NEW_MEMORY, null, 'remembered', new Date('2027-03-20T19:00:00Z'), BERLIN, 0.9)
  const first = scheduler.next(
    {
      due: noon('2027-03-20'),
      stability: 0,
      difficulty: 0,
      elapsed_days: 0,
      scheduled_days: 0,
      learning_steps: 0,
      reps: 0,
      lapses: 0,
      state: State.New,
    },
    noon('2027-03-20'),
    Rating.Good,
  )
  t.equal(review.scheduled_days, first.card.scheduled_days)
  t.equal(review.memory.stability, first.card.stability)
  t.equal(review.elapsed_days, 0)
  t.equal(review.slot, stabilityBand(first.card.stability))
  // 2027-03-28 Berlin moves from UTC+1 to UTC+2: a due date after it is 02:00Z, before it 03:00Z.
  const due = new Date(Date.UTC(2027, 2, 20 + first.card.scheduled_days, 4))
  const expected = due.getTime() - (due >= new Date('2027-03-28T01:00:00Z') ? 2 : 1) * 3_600_000
  t.equal(review.next_review_at.toISOString(), new Date(expected).toISOString(), '04:00 local')
})

t.test('elapsed days are study days: 23:30 and 03:30 the next night are one day', async (t) => {
  const memory = { state: 'review' as const, stability: 4, difficulty: 5, reps: 2, lapses: 0 }
  // 23:30 on the 25th and 03:30 on the 26th local (UTC+1) are both study day the 25th.
  const late = fsrsReview(
    memory,
    new Date('2027-03-24T18:00:00Z'),
    'remembered',
    new Date('2027-03-25T22:30:00Z'),
    BERLIN,
    0.9,
  )
  const night = fsrsReview(
    memory,
    new Date('2027-03-24T18:00:00Z'),
    'remembered',
    new Date('2027-03-26T02:30:00Z'),
    BERLIN,
    0.9,
  )
  t.equal(late.elapsed_days, 1)
  t.equal(night.elapsed_days, 1, 'before 04:00 local: still the previous study day')
  t.equal(night.next_review_at.toISOString(), late.next_review_at.toISOString())
  const direct = scheduler.next(
    {
      due: noon('2027-03-25'),
      ...memory,
      state: State.Review,
      elapsed_days: 0,
      scheduled_days: 0,
      learning_steps: 0,
      last_review: noon('2027-03-24'),
    },
    noon('2027-03-25'),
    Rating.Good,
  )
  t.equal(late.scheduled_days, direct.card.scheduled_days)
  t.equal(late.memory.stability, direct.card.stability)
  const forgot = fsrsReview(
    memory,
    new Date('2027-03-24T18:00:00Z'),
    'forgot',
    new Date('2027-03-25T22:30:00Z'),
    BERLIN,
    0.9,
  )
  t.equal(forgot.memory.lapses, 1, 'forgot is Again: a lapse')
  t.ok(forgot.memory.stability < memory.stability)
})

t.test('a higher desired retention gives a shorter interval', async (t) => {
  const memory = { state: 'review' as const, stability: 20, difficulty: 5, reps: 4, lapses: 0 }
  const last = new Date('2027-01-01T18:00:00Z')
  const at = new Date('2027-01-21T18:00:00Z')
  const low = fsrsReview(memory, last, 'remembered', at, BERLIN, 0.8)
  const high = fsrsReview(memory, last, 'remembered', at, BERLIN, 0.95)
  t.ok(high.scheduled_days < low.scheduled_days, `${high.scheduled_days} < ${low.scheduled_days}`)
})

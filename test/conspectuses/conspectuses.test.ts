// Conspectus routes: create, patch, review ladder, due list and summary, ownership.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { buildTestApp, newKey } from '../helpers/app.js'
import { conspectusBody, createConspectus, createOwner, manualClock, ownerQuery } from '../helpers/fixtures.js'

const clock = manualClock('2026-01-10T12:00:00Z')
const api = await buildTestApp(t, {}, { now: clock.now })

t.test('create saves the note in slot A, due 04:00 local the next study day', async (t) => {
  clock.set('2026-01-10T12:00:00Z')
  const owner = await createOwner(api, { timezone: 'Europe/Berlin' })
  const body = conspectusBody(owner)
  const res = await api.post('/api/v1/conspectuses', body)
  t.equal(res.statusCode, 201)
  const c = res.json()
  t.match(c, {
    ...body,
    slot: 'A',
    next_review_at: '2026-01-11T03:00:00.000Z',
    last_reviewed_at: null,
    review_count: 0,
  })
  t.equal(c.created_at, '2026-01-10T12:00:00.000Z')
  t.equal(c.updated_at, c.created_at)
  t.match(c.conspectus_uuid, /^[0-9a-f-]{36}$/)
})

t.test('title is optional and bullets may be empty', async (t) => {
  const owner = await createOwner(api)
  const { title: _title, ...withoutTitle } = conspectusBody(owner, { bullets: [] })
  const res = await api.post('/api/v1/conspectuses', withoutTitle)
  t.equal(res.statusCode, 201)
  t.match(res.json(), { title: null, bullets: [] })
})

t.test('an unknown owner is 404 USER_404 and nothing is stored', async (t) => {
  const ghost = { system_user_id: 'ghost', system_uuid: randomUUID() }
  const res = await api.post('/api/v1/conspectuses', conspectusBody(ghost))
  t.equal(res.statusCode, 404)
  t.equal(res.json().code, 'USER_404')
  const due = await api.get(`/api/v1/conspectuses/due?${ownerQuery(ghost)}`)
  t.equal(due.json().code, 'USER_404')
  t.equal((await api.get(`/api/v1/schedule/summary?${ownerQuery(ghost)}`)).json().code, 'USER_404')
})

t.test('the full ladder A->B->C->D->D->forgot->A in three time zones', async (t) => {
  // Each review happens 6 hours after the card fell due; expected next_review_at after each step.
  const walks: [string, string[]][] = [
    [
      'America/New_York',
      [
        '2026-03-06T09:00:00.000Z',
        '2026-03-09T08:00:00.000Z',
        '2026-03-16T08:00:00.000Z',
        '2026-04-06T08:00:00.000Z',
        '2026-04-27T08:00:00.000Z',
        '2026-04-28T08:00:00.000Z',
      ],
    ],
    [
      'Europe/Berlin',
      [
        '2026-03-06T03:00:00.000Z',
        '2026-03-09T03:00:00.000Z',
        '2026-03-16T03:00:00.000Z',
        '2026-04-06T02:00:00.000Z',
        '2026-04-27T02:00:00.000Z',
        '2026-04-28T02:00:00.000Z',
      ],
    ],
    [
      'Asia/Tokyo',
      [
        '2026-03-05T19:00:00.000Z',
        '2026-03-08T19:00:00.000Z',
        '2026-03-15T19:00:00.000Z',
        '2026-04-05T19:00:00.000Z',
        '2026-04-26T19:00:00.000Z',
        '2026-04-27T19:00:00.000Z',
      ],
    ],
  ]
  for (const [zone, expected] of walks) {
    clock.set('2026-03-05T14:00:00Z')
    const owner = await createOwner(api, { timezone: zone })
    const created = await createConspectus(api, owner)
    t.equal(created.next_review_at, expected[0], `${zone}: created in A`)
    const outcomes = ['remembered', 'remembered', 'remembered', 'remembered', 'forgot']
    const slots = ['B', 'C', 'D', 'D', 'A']
    let current = created
    for (let i = 0; i < outcomes.length; i++) {
      const reviewedAt = new Date(Date.parse(current.next_review_at) + 6 * 3_600_000).toISOString()
      clock.set(reviewedAt)
      const res = await api.post(`/api/v1/conspectuses/${created.conspectus_uuid}/actions/review`, {
        ...owner,
        outcome: outcomes[i],
      })
      t.equal(res.statusCode, 200)
      current = res.json()
      t.equal(current.slot, slots[i], `${zone}: step ${i + 1} slot`)
      t.equal(current.next_review_at, expected[i + 1], `${zone}: step ${i + 1} due`)
      t.equal(current.review_count, i + 1)
      t.equal(current.last_reviewed_at, reviewedAt)
    }
  }
})

t.test('a replayed review returns the stored answer and does not move the slot twice', async (t) => {
  clock.set('2026-02-01T10:00:00Z')
  const owner = await createOwner(api)
  const c = await createConspectus(api, owner)
  const key = newKey()
  const url = `/api/v1/conspectuses/${c.conspectus_uuid}/actions/review`
  const first = await api.post(url, { ...owner, outcome: 'remembered' }, key)
  clock.set('2026-02-02T10:00:00Z')
  const replay = await api.post(
    url,
    { outcome: 'remembered', system_uuid: owner.system_uuid, system_user_id: owner.system_user_id },
    key,
  )
  t.equal(replay.statusCode, 200)
  t.equal(replay.headers['idempotent-replayed'], 'true')
  t.same(replay.json(), first.json())
  const [row] = await api.db
    .sql`select slot, review_count from conspectuses where conspectus_uuid = ${c.conspectus_uuid}`
  t.same(row, { slot: 'B', review_count: 1 })
  const conflict = await api.post(url, { ...owner, outcome: 'forgot' }, key)
  t.equal(conflict.statusCode, 409)
})

t.test('review validates the outcome', async (t) => {
  const owner = await createOwner(api)
  const c = await createConspectus(api, owner)
  const res = await api.post(`/api/v1/conspectuses/${c.conspectus_uuid}/actions/review`, { ...owner, outcome: 'maybe' })
  t.equal(res.statusCode, 422)
  t.same(
    res.json().errors.map((e: { code: string }) => e.code),
    ['CONS_024'],
  )
})

t.test('patch changes content only and never the schedule', async (t) => {
  clock.set('2026-02-10T10:00:00Z')
  const owner = await createOwner(api)
  const c = await createConspectus(api, owner)
  clock.set('2026-02-11T11:00:00Z')
  const res = await api.patch(`/api/v1/conspectuses/${c.conspectus_uuid}`, {
    ...owner,
    title: null,
    bullets: ['one'],
    cue_sheet: { topic: 'New' },
  })
  t.equal(res.statusCode, 200)
  t.match(res.json(), {
    ...c,
    title: null,
    bullets: ['one'],
    cue_sheet: { topic: 'New' },
    updated_at: '2026-02-11T11:00:00.000Z',
  })
  t.equal(res.json().next_review_at, c.next_review_at)
  t.equal(res.json().slot, 'A')
})

t.test('a patch with only the owner key is 400 CONS_102', async (t) => {
  const owner = await createOwner(api)
  const c = await createConspectus(api, owner)
  const res = await api.patch(`/api/v1/conspectuses/${c.conspectus_uuid}`, { ...owner })
  t.equal(res.statusCode, 400)
  t.same(res.json(), {
    code: 'CONS_102',
    key: 'CONSPECTUS_PATCH_BODY_EMPTY',
    message: 'The patch contains only the owner key; send at least one of title, cue_sheet, dense_paragraph, bullets.',
    source: 'business',
  })
})

t.test("another user's conspectus answers 404 CONS_404 for patch, review and error-log links", async (t) => {
  const alice = await createOwner(api)
  const bob = await createOwner(api)
  const note = await createConspectus(api, alice)
  const patch = await api.patch(`/api/v1/conspectuses/${note.conspectus_uuid}`, { ...bob, title: 'mine now' })
  t.equal(patch.statusCode, 404)
  t.same(patch.json(), {
    code: 'CONS_404',
    key: 'CONSPECTUS_NOT_FOUND',
    message: 'No conspectus with this id belongs to this user.',
    source: 'business',
  })
  const review = await api.post(`/api/v1/conspectuses/${note.conspectus_uuid}/actions/review`, {
    ...bob,
    outcome: 'forgot',
  })
  t.equal(review.json().code, 'CONS_404')
  const link = await api.post('/api/v1/errors', { ...bob, message: 'x', conspectus_uuid: note.conspectus_uuid })
  t.equal(link.json().code, 'CONS_404')
  const missing = await api.patch(`/api/v1/conspectuses/${randomUUID()}`, { ...alice, title: 'x' })
  t.equal(missing.json().code, 'CONS_404')
  const [row] = await api.db.sql`select title, slot from conspectuses where conspectus_uuid = ${note.conspectus_uuid}`
  t.same(row, { title: 'Photosynthesis', slot: 'A' }, 'nothing changed')
  const bobsDue = await api.get(`/api/v1/conspectuses/due?${ownerQuery(bob)}&as_of=2030-01-01T00:00:00Z`)
  t.same(bobsDue.json(), [], "bob never sees alice's notes")
})

t.test('the due list: next_review_at <= as_of, ordered, limited', async (t) => {
  const owner = await createOwner(api, { timezone: 'UTC' })
  const created = []
  for (const day of ['2026-05-03', '2026-05-01', '2026-05-02', '2026-05-01']) {
    clock.set(`${day}T12:00:00Z`)
    created.push(await createConspectus(api, owner))
  }
  const url = (q: string) => `/api/v1/conspectuses/due?${ownerQuery(owner)}&${q}`
  const all = (await api.get(url('as_of=2026-05-10T00:00:00Z'))).json()
  const expected = [...created].sort(
    (a, b) => a.next_review_at.localeCompare(b.next_review_at) || a.conspectus_uuid.localeCompare(b.conspectus_uuid),
  )
  t.same(
    all.map((c: { conspectus_uuid: string }) => c.conspectus_uuid),
    expected.map((c) => c.conspectus_uuid),
  )
  t.equal((await api.get(url('as_of=2026-05-02T04:00:00Z'))).json().length, 2, 'due exactly at as_of is included')
  t.equal((await api.get(url('as_of=2026-05-02T03:59:59Z'))).json().length, 0)
  t.equal((await api.get(url('as_of=2026-05-10T00:00:00Z&limit=3'))).json().length, 3)
  clock.set('2026-05-03T05:00:00Z')
  t.equal((await api.get(url(''))).json().length, 3, 'as_of defaults to now')
})

t.test('due-list and summary parameters are checked: 422 COMMON_422', async (t) => {
  const owner = await createOwner(api)
  for (const q of ['as_of=yesterday', 'limit=0', 'limit=201', 'limit=ten']) {
    const res = await api.get(`/api/v1/conspectuses/due?${ownerQuery(owner)}&${q}`)
    t.equal(res.statusCode, 422, q)
    t.equal(res.json().errors[0].code, 'COMMON_422')
  }
  const missing = await api.get(`/api/v1/schedule/summary?system_user_id=${owner.system_user_id}`)
  t.equal(missing.statusCode, 422)
  t.same(missing.json().errors[0].details.loc, ['query', 'system_uuid'])
})

t.test('the summary counts every slot and the due ones', async (t) => {
  const owner = await createOwner(api, { timezone: 'UTC' })
  clock.set('2026-06-01T12:00:00Z')
  const notes = [
    await createConspectus(api, owner),
    await createConspectus(api, owner),
    await createConspectus(api, owner),
  ]
  const review = (id: string, outcome: string) =>
    api.post(`/api/v1/conspectuses/${id}/actions/review`, { ...owner, outcome })
  await review(notes[0].conspectus_uuid, 'remembered') // B, due 06-04
  await review(notes[1].conspectus_uuid, 'remembered') // B
  await review(notes[1].conspectus_uuid, 'remembered') // C, due 06-08
  const res = await api.get(`/api/v1/schedule/summary?${ownerQuery(owner)}&as_of=2026-06-02T04:00:00Z`)
  t.same(res.json(), {
    ...owner,
    as_of: '2026-06-02T04:00:00.000Z',
    total: 3,
    due_now_count: 1,
    slots: { A: 1, B: 1, C: 1, D: 0 },
  })
  const empty = await createOwner(api)
  const none = await api.get(`/api/v1/schedule/summary?${ownerQuery(empty)}`)
  t.match(none.json(), {
    total: 0,
    due_now_count: 0,
    slots: { A: 0, B: 0, C: 0, D: 0 },
    as_of: clock.now().toISOString(),
  })
})

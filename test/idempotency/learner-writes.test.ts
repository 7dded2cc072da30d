// Writes on a learner's behalf (conspectus create, patch, review; error-log create) read the
// learner as a step of the handler, in the same round trip as the stored-answer lookup, and the
// work gets the learner's id and time zone. What must hold: a stored answer comes before the
// learner check, a missing learner is a 404 that stores nothing, the learner is read afresh on
// every write (no replica keeps learners: one changed elsewhere is written for as it is now), and
// replays, 409s and concurrent twins behave as on any idempotent write.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { nextReviewAt } from '../../src/schedule/leitner.js'
import { buildTestApp, newKey, type TestApi } from '../helpers/app.js'
import { conspectusBody, createConspectus, createOwner, manualClock, type Owner } from '../helpers/fixtures.js'

const reviewUrl = (id: string) => `/api/v1/conspectuses/${id}/actions/review`

async function clientUuid(api: TestApi, owner: Owner): Promise<string> {
  const [row] = await api.db.sql<{ client_uuid: string }[]>`
    select client_uuid from users where system_user_id = ${owner.system_user_id} and system_uuid = ${owner.system_uuid}`
  return row!.client_uuid
}

t.test('a missing learner is 404 and stores nothing: the same key works once the learner exists', async (t) => {
  const api = await buildTestApp(t)
  const ghost = { system_user_id: `g-${randomUUID().slice(0, 8)}`, system_uuid: randomUUID() }
  const key = newKey()
  const missing = await api.post('/api/v1/conspectuses', conspectusBody(ghost), key)
  t.equal(missing.statusCode, 404)
  t.equal(missing.json().code, 'USER_404')
  const [stored] = await api.db
    .sql`select count(*)::int as count from idempotency_records where idempotency_key = ${key}`
  t.equal(stored?.count, 0, 'no answer stored for the 404')
  await api.post('/api/v1/user', { ...ghost, full_name: 'Now Here' })
  const created = await api.post('/api/v1/conspectuses', conspectusBody(ghost), key)
  t.equal(created.statusCode, 201)
  t.notOk(created.headers['idempotent-replayed'])
  t.equal(created.json().system_user_id, ghost.system_user_id)
})

t.test('a stored answer replays even after the learner has moved to another system', async (t) => {
  const api = await buildTestApp(t)
  const owner = await createOwner(api)
  const note = await createConspectus(api, owner)
  const key = newKey()
  const review = { ...owner, outcome: 'remembered' }
  const url = `/api/v1/conspectuses/${note.conspectus_uuid}/actions/review`
  const first = await api.post(url, review, key)
  t.equal(first.statusCode, 200)
  const moved = await api.patch(`/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`, {
    system_uuid: randomUUID(),
  })
  t.equal(moved.statusCode, 200)
  const again = await api.post(url, review, key)
  t.equal(again.statusCode, 200, 'the retry is answered from the record, before the learner is looked for')
  t.equal(again.headers['idempotent-replayed'], 'true')
  t.equal(again.body, first.body)
  t.equal(
    (await api.post(url, { ...review, outcome: 'forgot' }, key)).statusCode,
    409,
    'another body under the key is still 409',
  )
  const fresh = await api.post(url, review, newKey())
  t.equal(fresh.statusCode, 404, 'a new write under the old key of the learner finds nobody')
  t.equal(fresh.json().code, 'USER_404')
})

t.test('a time zone changed elsewhere (another replica, an operator) is the one the next review uses', async (t) => {
  const clock = manualClock('2026-03-10T12:00:00.000Z')
  const api = await buildTestApp(t, {}, { now: clock.now })
  const owner = await createOwner(api, { timezone: 'UTC' })
  const note = await createConspectus(api, owner)
  // As another replica's PATCH (or an operator) would: nothing tells this replica.
  await api.db.sql`update users set timezone = 'Asia/Tokyo' where system_user_id = ${owner.system_user_id}`
  const review = await api.post(reviewUrl(note.conspectus_uuid), { ...owner, outcome: 'remembered' })
  t.equal(review.statusCode, 200)
  const inTokyo = nextReviewAt(clock.now(), 'B', 'Asia/Tokyo').toISOString()
  t.not(inTokyo, nextReviewAt(clock.now(), 'B', 'UTC').toISOString(), 'the two zones give different due times here')
  t.equal(review.json().next_review_at, inTokyo, 'due at 04:00 in Tokyo')
  t.equal(review.json().review_count, 1, 'the review was applied once')
  const [stored] = await api.db
    .sql`select count(*)::int as n from idempotency_records where response_body = ${review.body}`
  t.equal(stored?.n, 1, 'one answer stored: the one sent')
})

t.test('a learner moved to another system key is not written for under the old key', async (t) => {
  const api = await buildTestApp(t)
  const owner = await createOwner(api)
  const note = await createConspectus(api, owner)
  await api.db.sql`update users set system_uuid = ${randomUUID()} where system_user_id = ${owner.system_user_id}`
  const review = await api.post(reviewUrl(note.conspectus_uuid), { ...owner, outcome: 'remembered' })
  t.equal(review.statusCode, 404)
  t.equal(review.json().code, 'USER_404')
  const [row] = await api.db.sql`select review_count from conspectuses where conspectus_uuid = ${note.conspectus_uuid}`
  t.equal(row?.review_count, 0, 'nothing was written')
})

t.test('a learner replaced under the same key: new writes belong to the new learner', async (t) => {
  const api = await buildTestApp(t)
  const owner = await createOwner(api)
  await createConspectus(api, owner)
  const first = await clientUuid(api, owner)
  // An operator removes the learner; the partner creates it again under the same key.
  await api.db.sql`delete from users where client_uuid = ${first}`
  t.equal((await api.post('/api/v1/user', { ...owner, full_name: 'Again' })).statusCode, 201)
  const second = await clientUuid(api, owner)
  t.not(second, first)

  const note = await api.post('/api/v1/conspectuses', conspectusBody(owner))
  t.equal(note.statusCode, 201, 'not a foreign-key failure on the removed learner')
  const log = await api.post('/api/v1/errors', { ...owner, message: 'after the replacement' })
  t.equal(log.statusCode, 201)
  const [owners] = await api.db.sql`
    select (select user_id from conspectuses where conspectus_uuid = ${note.json().conspectus_uuid}) as note_owner,
           (select user_id from error_logs where error_log_uuid = ${log.json().error_log_uuid}) as log_owner`
  t.same(owners, { note_owner: second, log_owner: second })
})

t.test('a retry replays, another body is 409, and concurrent twins make one review', async (t) => {
  const api = await buildTestApp(t)
  const owner = await createOwner(api)
  const note = await createConspectus(api, owner)
  const url = reviewUrl(note.conspectus_uuid)
  const body = { ...owner, outcome: 'remembered' }
  const key = newKey()
  const twins = await Promise.all(Array.from({ length: 8 }, () => api.post(url, body, key)))
  t.same(
    twins.map((r) => r.statusCode),
    Array(8).fill(200),
  )
  t.equal(new Set(twins.map((r) => r.body)).size, 1, 'one answer, byte for byte')
  t.equal(twins.filter((r) => r.headers['idempotent-replayed'] === 'true').length, 7)
  const retry = await api.post(url, body, key)
  t.equal(retry.headers['idempotent-replayed'], 'true')
  t.equal(retry.body, twins[0]!.body)
  const other = await api.post(url, { ...body, outcome: 'forgot' }, key)
  t.equal(other.statusCode, 409)
  t.equal(other.json().key, 'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD')
  const [row] = await api.db
    .sql`select review_count, slot from conspectuses where conspectus_uuid = ${note.conspectus_uuid}`
  t.same(row, { review_count: 1, slot: 'B' })
})

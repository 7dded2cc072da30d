// A write for a learner this replica has read recently goes straight to its transaction, with
// no lookup first (src/idempotency/known-learners.ts). What must hold: the lookup is really
// skipped; a learner changed behind the replica's back (another replica, an operator) is never
// written for as it was; replays, 409s and concurrent twins behave as after a lookup.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { createKnownLearners } from '../../src/idempotency/known-learners.js'
import type { User } from '../../src/repositories/users.js'
import { nextReviewAt } from '../../src/schedule/leitner.js'
import { buildTestApp, newKey, type TestApi } from '../helpers/app.js'
import { conspectusBody, createConspectus, createOwner, manualClock, type Owner } from '../helpers/fixtures.js'

/** How many times the stored-answer-and-learner lookup has run (db timings in /metrics). */
async function lookups(api: TestApi): Promise<number> {
  const text = (await api.get('/metrics')).body
  return Number(/db_operation_duration_seconds_count\{operation="idempotency\.findWithLearner"\} (\d+)/.exec(text)?.[1] ?? 0)
}

const reviewUrl = (id: string) => `/api/v1/conspectuses/${id}/actions/review`

async function clientUuid(api: TestApi, owner: Owner): Promise<string> {
  const [row] = await api.db.sql<{ client_uuid: string }[]>`
    select client_uuid from users where system_user_id = ${owner.system_user_id} and system_uuid = ${owner.system_uuid}`
  return row!.client_uuid
}

t.test('a write for a learner the replica has just read runs without the lookup', async (t) => {
  const api = await buildTestApp(t)
  const owner = await createOwner(api)
  const note = await createConspectus(api, owner)
  const before = await lookups(api)
  t.ok(before >= 1, 'the first write looked up')
  const review = await api.post(reviewUrl(note.conspectus_uuid), { ...owner, outcome: 'remembered' })
  t.equal(review.statusCode, 200)
  t.equal(review.json().slot, 'B')
  const patched = await api.patch(`/api/v1/conspectuses/${note.conspectus_uuid}`, { ...owner, title: 'Renamed' })
  t.equal(patched.statusCode, 200)
  t.equal(await lookups(api), before, 'no lookup for the review and the patch')
  const [row] = await api.db.sql`select review_count, title from conspectuses where conspectus_uuid = ${note.conspectus_uuid}`
  t.same(row, { review_count: 1, title: 'Renamed' })
})

t.test('a time zone changed behind the replica is the one the next review uses', async (t) => {
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
  const [stored] = await api.db.sql`select count(*)::int as n from idempotency_records where response_body = ${review.body}`
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

t.test('for a known learner, a retry replays, another body is 409, and concurrent twins make one review', async (t) => {
  const api = await buildTestApp(t)
  const owner = await createOwner(api)
  const note = await createConspectus(api, owner)
  const url = reviewUrl(note.conspectus_uuid)
  const body = { ...owner, outcome: 'remembered' }
  const key = newKey()
  const twins = await Promise.all(Array.from({ length: 8 }, () => api.post(url, body, key)))
  t.same(twins.map((r) => r.statusCode), Array(8).fill(200))
  t.equal(new Set(twins.map((r) => r.body)).size, 1, 'one answer, byte for byte')
  t.equal(twins.filter((r) => r.headers['idempotent-replayed'] === 'true').length, 7)
  const retry = await api.post(url, body, key)
  t.equal(retry.headers['idempotent-replayed'], 'true')
  t.equal(retry.body, twins[0]!.body)
  const other = await api.post(url, { ...body, outcome: 'forgot' }, key)
  t.equal(other.statusCode, 409)
  t.equal(other.json().key, 'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD')
  const [row] = await api.db.sql`select review_count, slot from conspectuses where conspectus_uuid = ${note.conspectus_uuid}`
  t.same(row, { review_count: 1, slot: 'B' })
})

t.test('known learners: bounded, least recently used out, one entry however the UUID is spelled', async (t) => {
  const learners = createKnownLearners(2)
  const key = (n: number) => ({ system_uuid: `0000000${n}-aaaa-4aaa-8aaa-00000000000a`, system_user_id: `u${n}` })
  const user = (n: number) => ({ client_uuid: `c${n}`, timezone: 'UTC' }) as User
  learners.remember(key(1), user(1))
  learners.remember(key(2), user(2))
  t.equal(learners.get({ ...key(1), system_uuid: key(1).system_uuid.toUpperCase() })?.client_uuid, 'c1', 'upper-case UUID, same learner')
  learners.remember(key(3), user(3))
  t.equal(learners.get(key(2)), undefined, 'the least recently used went')
  t.equal(learners.get(key(1))?.client_uuid, 'c1')
  learners.forget(key(1))
  t.equal(learners.get(key(1)), undefined)
})

// Writes on a learner's behalf (conspectus create, patch, review; error-log create) read the
// stored answer and the learner in one statement before their transaction. What that must keep:
// a stored answer comes before the learner check, a missing learner is a 404 that stores
// nothing, and records from before key ids (0009) still replay for API_KEYS keys.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { idempotencyScope } from '../../src/idempotency/scope.js'
import { requestHash } from '../../src/idempotency/request-hash.js'
import { buildTestApp, newKey } from '../helpers/app.js'
import { conspectusBody, createConspectus, createOwner } from '../helpers/fixtures.js'

t.test('a missing learner is 404 and stores nothing: the same key works once the learner exists', async (t) => {
  const api = await buildTestApp(t)
  const ghost = { system_user_id: `g-${randomUUID().slice(0, 8)}`, system_uuid: randomUUID() }
  const key = newKey()
  const missing = await api.post('/api/v1/conspectuses', conspectusBody(ghost), key)
  t.equal(missing.statusCode, 404)
  t.equal(missing.json().code, 'USER_404')
  const [stored] = await api.db.sql`select count(*)::int as count from idempotency_records where idempotency_key = ${key}`
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
  const moved = await api.patch(`/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`, { system_uuid: randomUUID() })
  t.equal(moved.statusCode, 200)
  const again = await api.post(url, review, key)
  t.equal(again.statusCode, 200, 'the retry is answered from the record, before the learner is looked for')
  t.equal(again.headers['idempotent-replayed'], 'true')
  t.equal(again.body, first.body)
  t.equal((await api.post(url, { ...review, outcome: 'forgot' }, key)).statusCode, 409, 'another body under the key is still 409')
  const fresh = await api.post(url, review, newKey())
  t.equal(fresh.statusCode, 404, 'a new write under the old key of the learner finds nobody')
  t.equal(fresh.json().code, 'USER_404')
})

t.test('on a learner route, a record from before key ids replays for API_KEYS keys; the caller\'s own record comes first', async (t) => {
  const api = await buildTestApp(t)
  // The record is there before the first write: the service checks for such records on a write
  // and then only every 10 s.
  const owner = { system_user_id: `l-${randomUUID().slice(0, 8)}`, system_uuid: randomUUID() }
  const body = { ...owner, message: 'from before 0009' }
  const scope = idempotencyScope('createErrorLog', {})
  const legacyAnswer = JSON.stringify({ legacy: true })
  await api.db.sql`insert into idempotency_records (key_id, scope, idempotency_key, request_hash, status_code, response_body, expires_at)
                   values ('', ${scope}, 'legacy-key', ${requestHash(body)}, 201, ${legacyAnswer}, now() + interval '1 hour')`
  t.equal((await api.post('/api/v1/user', { ...owner, full_name: 'Legacy Owner' })).statusCode, 201)
  const legacy = await api.app.inject({ method: 'POST', url: '/api/v1/errors', payload: body, headers: { 'x-api-key': 'test-key-1', 'idempotency-key': 'legacy-key' } })
  t.equal(legacy.statusCode, 201)
  t.equal(legacy.headers['idempotent-replayed'], 'true')
  t.equal(legacy.body, legacyAnswer, 'the stored bytes')

  // The caller's own record under the same key is preferred to the legacy one.
  const own = await api.post('/api/v1/errors', body, 'own-key')
  t.equal(own.statusCode, 201)
  await api.db.sql`insert into idempotency_records (key_id, scope, idempotency_key, request_hash, status_code, response_body, expires_at)
                   values ('', ${scope}, 'own-key', ${requestHash(body)}, 201, ${legacyAnswer}, now() + interval '1 hour')`
  const replay = await api.post('/api/v1/errors', body, 'own-key')
  t.equal(replay.body, own.body, 'its own answer, not the legacy one')
})

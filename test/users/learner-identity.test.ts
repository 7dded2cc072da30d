// A learner is found by its identity (client_uuid), whatever its system: erasure removes the
// stored answers made under a system it has since left, a learner whose system_uuid was cleared
// is read, exported and erased by client_uuid, and a key limited to systems cannot reach it.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { API_KEY, buildTestApp, newKey } from '../helpers/app.js'
import { conspectusBody, createOwner, ownerQuery } from '../helpers/fixtures.js'
import { writeKeyFile } from '../helpers/keys.js'

const SYSTEM_A = randomUUID()
const keyFile = await writeKeyFile(t, [
  {
    id: 'system-a',
    secret: 'ssk_system_a',
    scopes: ['users:read', 'users:export', 'users:erase'],
    systems: [SYSTEM_A],
  },
])
const api = await buildTestApp(t, { API_KEYS_FILE: keyFile })
const { sql } = api.db

t.test("erasure after a move removes the answers stored under the learner's old system", async (t) => {
  const owner = await createOwner(api)
  const noteKey = newKey()
  const body = conspectusBody(owner, { title: 'Secret title' })
  const note = await api.post('/api/v1/conspectuses', body, noteKey)
  t.equal(note.statusCode, 201)
  const noteId = note.json().conspectus_uuid
  const deleted = await api.request({ method: 'DELETE', url: `/api/v1/conspectuses/${noteId}?${ownerQuery(owner)}` })
  t.equal(deleted.statusCode, 200)
  const moved = { system_uuid: randomUUID(), system_user_id: owner.system_user_id }
  const put = await api.put(`/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`, {
    full_name: 'Owner',
    timezone: 'UTC',
    system_uuid: moved.system_uuid,
  })
  t.equal(put.statusCode, 200)

  const erased = await api.request({
    method: 'DELETE',
    url: `/api/v1/user/${moved.system_uuid}/${moved.system_user_id}`,
  })
  t.equal(erased.statusCode, 200)

  const replay = await api.post('/api/v1/conspectuses', body, noteKey)
  t.not(replay.headers['idempotent-replayed'], 'true', 'the stored answer is gone')
  t.equal(replay.statusCode, 404)
  const [left] = await sql<{ n: number }[]>`
    select count(*)::int as n from idempotency_records where response_body like ${`%${noteId}%`}
      or response_body like ${'%Secret title%'}`
  t.equal(left!.n, 0, 'no stored answer names the note')
})

t.test('a learner whose system_uuid was cleared: read, exported and erased by client_uuid', async (t) => {
  const owner = await createOwner(api, { system_uuid: SYSTEM_A })
  const userUrl = `/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`
  const me = (await api.get(userUrl)).json()
  await api.post('/api/v1/conspectuses', conspectusBody(owner))
  const cleared = await api.patch(userUrl, { system_uuid: null })
  t.equal(cleared.statusCode, 200)
  t.equal(cleared.json().system_uuid, null)

  const byId = `/api/v1/users/${me.client_uuid}`
  const read = await api.get(byId)
  t.equal(read.statusCode, 200)
  t.equal(read.json().client_uuid, me.client_uuid)

  const limited = { headers: {}, key: 'ssk_system_a' }
  for (const [method, url] of [
    ['GET', byId],
    ['GET', `${byId}/export`],
    ['DELETE', byId],
  ] as const) {
    const res = await api.request({ method, url, ...limited })
    t.equal(res.statusCode, 404, `${method} ${url}: a key limited to systems cannot reach a learner without one`)
  }

  const exported = await api.get(`${byId}/export`)
  t.equal(exported.statusCode, 200)
  t.equal(exported.json().user.client_uuid, me.client_uuid)
  t.equal(exported.json().conspectuses.length, 1)

  const erased = await api.request({ method: 'DELETE', url: byId })
  t.equal(erased.statusCode, 200)
  t.same(erased.json().erased.users, 1)
  t.equal(erased.json().erased.conspectuses, 1)
  t.ok(erased.json().erased.stored_answers >= 3, 'its create, note and PATCH answers went with it')
  t.equal((await api.get(byId)).statusCode, 404)
  t.equal((await api.request({ method: 'DELETE', url: byId })).statusCode, 404)
  const [left] = await sql<{ n: number }[]>`select count(*)::int as n from users where client_uuid = ${me.client_uuid}`
  t.equal(left!.n, 0)
})

t.test('a key limited to systems reaches a learner of its system by client_uuid', async (t) => {
  const owner = await createOwner(api, { system_uuid: SYSTEM_A })
  const me = (await api.get(`/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`)).json()
  const res = await api.request({ method: 'GET', url: `/api/v1/users/${me.client_uuid}`, key: 'ssk_system_a' })
  t.equal(res.statusCode, 200)
  const other = await createOwner(api)
  const them = (await api.get(`/api/v1/user/${other.system_uuid}/${other.system_user_id}`)).json()
  const refused = await api.request({ method: 'GET', url: `/api/v1/users/${them.client_uuid}`, key: 'ssk_system_a' })
  t.equal(refused.statusCode, 404, 'another system: answered as absent')
  t.equal((await api.get(`/api/v1/users/${randomUUID()}`, { 'x-api-key': API_KEY })).statusCode, 404)
})

t.test('30 concurrent PATCHes of one learner answer 200 or 409 CONCURRENT_UPDATE with Retry-After', async (t) => {
  const owner = await createOwner(api)
  const url = `/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`
  const answers = await Promise.all(
    Array.from({ length: 30 }, (_, i) => api.patch(url, { username: `name-${i}` }, newKey())),
  )
  const seen = new Map<string, number>()
  for (const res of answers) {
    const label = res.statusCode === 200 ? '200' : `${res.statusCode} ${res.json().key}`
    seen.set(label, (seen.get(label) ?? 0) + 1)
    if (res.statusCode === 409) t.ok(Number(res.headers['retry-after']) > 0, 'the contention code carries Retry-After')
  }
  t.comment(`answers: ${JSON.stringify(Object.fromEntries(seen))}`)
  const labels = [...seen.keys()]
  t.ok(
    labels.every((l) => l === '200' || l === '409 CONCURRENT_UPDATE'),
    `only 200 and the contention code: ${JSON.stringify(Object.fromEntries(seen))}`,
  )
  t.ok((seen.get('200') ?? 0) >= 1)
})

t.test('a telemetry batch retried with its Idempotency-Key is stored once', async (t) => {
  const sessionId = `s-${randomUUID()}`
  const batch = {
    events: [1, 2, 3].map((n) => ({
      event: 'search_query',
      emitted_at_ms: Date.now() - n * 1000,
      query_id: `q-${sessionId}-${n}`,
      query_text: 'retry',
      session_id: sessionId,
      results_count: 1,
    })),
  }
  const key = newKey()
  const first = await api.post('/api/v1/telemetry/docs-search/batch', batch, key)
  t.equal(first.statusCode, 202)
  t.same(first.json(), { accepted: 3 })
  const retried = await api.post('/api/v1/telemetry/docs-search/batch', batch, key)
  t.equal(retried.statusCode, 202)
  t.equal(retried.headers['idempotent-replayed'], 'true')
  t.same(retried.json(), { accepted: 3 })
  const [stored] = await sql<{ n: number }[]>`
    select count(*)::int as n from docs_search_events where session_id = ${sessionId}`
  t.equal(stored!.n, 3, 'stored once')
  const other = await api.post('/api/v1/telemetry/docs-search/batch', { events: batch.events.slice(0, 1) }, key)
  t.equal(other.statusCode, 409, 'the same key with another batch')
  const malformed = await api.post('/api/v1/telemetry/docs-search/batch', batch, '\u0007bad')
  t.equal(malformed.statusCode, 400)
  const keyless = await api.post('/api/v1/telemetry/docs-search/batch', batch, null)
  t.equal(keyless.statusCode, 202, 'a batch without a key is stored as a new batch')
})

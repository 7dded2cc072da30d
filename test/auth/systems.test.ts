// Object-level authorisation by system: a key bound to system A that names system B anywhere
// (path, query, body, a new value in PUT/PATCH, null clearing it) gets 403
// SECURITY_SYSTEM_FORBIDDEN, the same answer whether B's user, conspectus or error log exists
// or not. It is decided after validation and before Idempotency-Key and any lookup.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { buildTestApp, newKey } from '../helpers/app.js'
import { conspectusBody, createConspectus, createOwner, ownerQuery, type Owner } from '../helpers/fixtures.js'
import { writeKeyFile } from '../helpers/keys.js'

const A = randomUUID()
const A_KEY = 'ssk_bound_to_a'
const api = await buildTestApp(t, {
  API_KEYS_FILE: await writeKeyFile(t, [{ id: 'partner-a', secret: A_KEY, systems: [A.toUpperCase()] }]),
})

// System B's data, made with the full-access key: one of each, and a twin that does not exist.
const existing = await createOwner(api)
const missing: Owner = { system_user_id: 'nobody-here', system_uuid: randomUUID() }
const conspectus = await createConspectus(api, existing)
const logged = await api.post('/api/v1/errors', {
  ...existing,
  message: 'mistake',
  conspectus_uuid: conspectus.conspectus_uuid,
})
if (logged.statusCode !== 201) throw new Error(logged.body)
const ownA = await createOwner(api, { system_uuid: A })

type Probe = (
  owner: Owner,
  conspectusUuid: string,
) => { method: 'GET' | 'POST' | 'PUT' | 'PATCH'; url: string; payload?: Record<string, unknown> }
const probes: Record<string, Probe> = {
  'GET user': (o) => ({ method: 'GET', url: `/api/v1/user/${o.system_uuid}/${o.system_user_id}` }),
  'POST user': (o) => ({ method: 'POST', url: '/api/v1/user', payload: { ...o, full_name: 'X' } }),
  'PUT user': (o) => ({
    method: 'PUT',
    url: `/api/v1/user/${o.system_uuid}/${o.system_user_id}`,
    payload: { full_name: 'X', timezone: 'UTC' },
  }),
  'PATCH user': (o) => ({
    method: 'PATCH',
    url: `/api/v1/user/${o.system_uuid}/${o.system_user_id}`,
    payload: { full_name: 'X' },
  }),
  'POST conspectus': (o) => ({ method: 'POST', url: '/api/v1/conspectuses', payload: conspectusBody(o) }),
  'GET due list': (o) => ({ method: 'GET', url: `/api/v1/conspectuses/due?${ownerQuery(o)}` }),
  'PATCH conspectus': (o, c) => ({ method: 'PATCH', url: `/api/v1/conspectuses/${c}`, payload: { ...o, title: 'X' } }),
  'POST review': (o, c) => ({
    method: 'POST',
    url: `/api/v1/conspectuses/${c}/actions/review`,
    payload: { ...o, outcome: 'remembered' },
  }),
  'GET schedule summary': (o) => ({ method: 'GET', url: `/api/v1/schedule/summary?${ownerQuery(o)}` }),
  'POST error log': (o, c) => ({
    method: 'POST',
    url: '/api/v1/errors',
    payload: { ...o, message: 'm', conspectus_uuid: c },
  }),
  'GET error logs': (o, c) => ({ method: 'GET', url: `/api/v1/errors?${ownerQuery(o)}&conspectus_uuid=${c}` }),
}

for (const [name, probe] of Object.entries(probes)) {
  t.test(`${name}: system B, existing or not, answers the same 403`, async (t) => {
    const answers = []
    for (const [owner, conspectusUuid] of [
      [existing, conspectus.conspectus_uuid],
      [missing, randomUUID()],
    ] as const) {
      const res = await api.request({
        ...probe(owner, conspectusUuid),
        key: A_KEY,
        headers: { 'idempotency-key': newKey() },
      })
      answers.push({ status: res.statusCode, body: res.json() })
    }
    t.equal(answers[0]!.status, 403)
    t.same(answers[0]!.body, {
      code: 'COMMON_403',
      key: 'SECURITY_SYSTEM_FORBIDDEN',
      message: 'This API key may not act on this system_uuid.',
      source: 'security',
    })
    t.same(answers[1], answers[0], 'existing and not existing: no difference')
    // Its own system, in any case, passes the check.
    const own = await api.request({
      ...probe({ ...ownA, system_uuid: A.toUpperCase() }, randomUUID()),
      key: A_KEY,
      headers: { 'idempotency-key': newKey() },
    })
    t.not(own.statusCode, 403, `own system upper-cased: ${own.statusCode}`)
  })
}

t.test('a new system_uuid in PUT/PATCH must be allowed too; null is forbidden', async (t) => {
  const url = `/api/v1/user/${A}/${ownA.system_user_id}`
  const forbidden = [
    { method: 'PUT', payload: { full_name: 'X', timezone: 'UTC', system_uuid: existing.system_uuid } },
    { method: 'PATCH', payload: { system_uuid: existing.system_uuid } },
    { method: 'PATCH', payload: { system_uuid: null } },
    { method: 'PUT', payload: { full_name: 'X', timezone: 'UTC', system_uuid: null } },
  ] as const
  for (const { method, payload } of forbidden) {
    const res = await api.request({ method, url, payload, key: A_KEY, headers: { 'idempotency-key': newKey() } })
    t.equal(res.statusCode, 403, `${method} ${JSON.stringify(payload)}`)
  }
  const same = await api.request({
    method: 'PATCH',
    url,
    payload: { system_uuid: A.toUpperCase(), full_name: 'Kept' },
    key: A_KEY,
    headers: { 'idempotency-key': newKey() },
  })
  t.equal(same.statusCode, 200, 'its own system, another case')
})

t.test('order: validation (422) before systems (403) before Idempotency-Key (400)', async (t) => {
  const invalid = await api.request({ method: 'POST', url: '/api/v1/user', payload: { ...existing }, key: A_KEY })
  t.equal(invalid.statusCode, 422, 'invalid body naming system B: 422')
  const noKey = await api.request({
    method: 'POST',
    url: '/api/v1/user',
    payload: { ...missing, full_name: 'X' },
    key: A_KEY,
  })
  t.equal(noKey.statusCode, 403, 'system B without Idempotency-Key: 403')
  const badKey = await api.request({
    method: 'POST',
    url: '/api/v1/user',
    payload: { ...missing, full_name: 'X' },
    key: A_KEY,
    headers: { 'idempotency-key': '\u00e9' },
  })
  t.equal(badKey.statusCode, 403, 'system B with a malformed Idempotency-Key: 403')
  const ownNoKey = await api.request({
    method: 'POST',
    url: '/api/v1/user',
    payload: { system_uuid: A, system_user_id: 'n', full_name: 'X' },
    key: A_KEY,
  })
  t.equal(ownNoKey.statusCode, 400, 'own system without Idempotency-Key: 400')
  t.equal(ownNoKey.json().key, 'IDEMPOTENCY_KEY_REQUIRED')
})

t.test('telemetry is governed by scopes alone', async (t) => {
  const res = await api.request({
    method: 'POST',
    url: '/api/v1/telemetry/docs-search',
    key: A_KEY,
    payload: { event: 'search_query', query_id: 'q1', emitted_at_ms: Date.now() },
  })
  t.equal(res.statusCode, 202, res.body)
})

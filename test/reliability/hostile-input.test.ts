// Hostile input gets its catalogued 4xx, reaches SQL only as parameters, and the process stays up.
import t, { type Test } from 'tap'
import { randomUUID } from 'node:crypto'
import { buildTestApp } from '../helpers/app.js'
import { createOwner } from '../helpers/fixtures.js'

const api = await buildTestApp(t, { BODY_LIMIT_BYTES: '65536' })
const json = (payload: string, extra: Record<string, string> = {}) =>
  api.request({
    method: 'POST',
    url: '/api/v1/user',
    payload,
    headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID(), ...extra },
  })
const stillUp = async (t: Test) => t.equal((await api.get('/live')).statusCode, 200, 'process still answers')

t.test('deeply nested JSON is a 422, not a stack overflow', async (t) => {
  const deep = `{"system_user_id":"a","system_uuid":"${randomUUID()}","full_name":"x","username":${'['.repeat(20_000)}${']'.repeat(20_000)}}`
  const res = await json(deep)
  t.equal(res.statusCode, 422)
  t.equal(res.json().errors[0].code, 'USER_013')
  const cue = await api.post('/api/v1/conspectuses', {
    system_user_id: 'a',
    system_uuid: randomUUID(),
    cue_sheet: JSON.parse(`{"a":${'{"a":'.repeat(100)}1${'}'.repeat(101)}`),
    dense_paragraph: 'p',
    bullets: [],
  })
  t.equal(cue.statusCode, 422)
  await stillUp(t)
})

t.test('prototype-pollution keys are refused', async (t) => {
  for (const payload of [
    '{"__proto__":{"admin":true},"full_name":"x"}',
    '{"constructor":{"prototype":{"admin":true}}}',
  ]) {
    const res = await json(payload)
    t.equal(res.statusCode, 422, payload)
    t.equal(res.json().errors[0].code, 'USER_013')
  }
  t.equal(({} as Record<string, unknown>).admin, undefined, 'Object.prototype untouched')
  await stillUp(t)
})

t.test('NUL characters are a 422 (PostgreSQL text cannot hold them)', async (t) => {
  const res = await json(JSON.stringify({ system_user_id: 'nul\u0000id', system_uuid: randomUUID(), full_name: 'x' }))
  t.equal(res.statusCode, 422)
  t.match(res.json().errors[0], { code: 'USER_002', details: { loc: ['body', 'system_user_id'] } })
  await stillUp(t)
})

t.test('invalid UTF-8 bytes do not break anything', async (t) => {
  const body = Buffer.concat([
    Buffer.from(`{"system_user_id":"utf","system_uuid":"${randomUUID()}","full_name":"`),
    Buffer.from([0xc3, 0x28, 0xff]),
    Buffer.from('"}'),
  ])
  const res = await api.request({
    method: 'POST',
    url: '/api/v1/user',
    payload: body,
    headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID() },
  })
  t.equal(res.statusCode, 422, 'refused, never stored with U+FFFD')
  await stillUp(t)
})

t.test('SQL metacharacters in every string field are stored and read back verbatim', async (t) => {
  const evil = `x'); drop table users; -- "\\ %_ $1`
  const body = {
    system_user_id: evil.slice(0, 36),
    system_uuid: randomUUID(),
    full_name: evil,
    username: evil,
    timezone: 'UTC',
  }
  const created = await api.post('/api/v1/user', body)
  t.equal(created.statusCode, 201)
  const read = await api.get(`/api/v1/user/${body.system_uuid}/${encodeURIComponent(body.system_user_id)}`)
  t.match(read.json(), { full_name: evil, username: evil, system_user_id: evil.slice(0, 36) })
  const owner = await createOwner(api)
  const note = await api.post('/api/v1/conspectuses', {
    ...owner,
    title: evil,
    cue_sheet: { [evil]: evil },
    dense_paragraph: evil,
    bullets: [evil],
  })
  t.match(note.json(), { title: evil, cue_sheet: { [evil]: evil }, dense_paragraph: evil, bullets: [evil] })
  const log = await api.post('/api/v1/errors', { ...owner, message: evil, context: { q: evil } })
  t.match(log.json(), { message: evil, context: { q: evil } })
  const tel = await api.request({
    method: 'POST',
    url: '/api/v1/telemetry/docs-search',
    payload: { event: evil.slice(0, 64), emitted_at_ms: 1, query_text: evil },
  })
  t.equal(tel.statusCode, 202)
  const [{ n }] = (await api.db
    .sql`select count(*)::int as n from docs_search_events where query_text = ${evil}`) as unknown as [{ n: number }]
  t.equal(n, 1)
  const [{ exists }] = (await api.db.sql`select to_regclass('users') is not null as exists`) as unknown as [
    { exists: boolean },
  ]
  t.ok(exists, 'users table still there')
})

t.test('huge strings: over the field limit is 422, over the body limit is 413', async (t) => {
  t.equal(
    (await api.post('/api/v1/user', { system_user_id: 'h', system_uuid: randomUUID(), full_name: 'x'.repeat(60_000) }))
      .statusCode,
    422,
  )
  t.equal(
    (await api.post('/api/v1/user', { system_user_id: 'h', system_uuid: randomUUID(), full_name: 'x'.repeat(70_000) }))
      .statusCode,
    413,
  )
})

t.test('X-Request-Id header injection is never echoed', async (t) => {
  for (const id of ['a\tb', 'ünïcode', 'x'.repeat(200)]) {
    const res = await api.request({ method: 'GET', url: '/live', headers: { 'x-request-id': id } })
    t.not(res.headers['x-request-id'], id)
    t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/)
  }
})

t.test('over-long and non-ASCII Idempotency-Keys are 400 COMMON_400', async (t) => {
  for (const key of ['k'.repeat(129), 'clé', '\u0007bell']) {
    const res = await api.post('/api/v1/user', { system_user_id: 'ik', system_uuid: randomUUID(), full_name: 'x' }, key)
    t.equal(res.statusCode, 400)
    t.equal(res.json().key, 'IDEMPOTENCY_KEY_INVALID')
  }
})

t.test('wrong content types are 415; a missing body is 422', async (t) => {
  for (const type of ['text/plain', 'multipart/form-data; boundary=x', 'application/json-patch+json']) {
    const res = await api.request({
      method: 'POST',
      url: '/api/v1/user',
      payload: '{}',
      headers: { 'content-type': type, 'idempotency-key': 'w' },
    })
    t.equal(res.statusCode, 415, type)
  }
  const empty = await api.request({ method: 'POST', url: '/api/v1/user', headers: { 'idempotency-key': 'e' } })
  t.equal(empty.statusCode, 422)
  await stillUp(t)
})

t.test('no stack, SQL or driver text in any error body', async (t) => {
  const bodies = [
    (await json('{"full_name": ')).body,
    (await api.get('/api/v1/user/not-a-uuid/x')).body,
    (
      await api.post('/api/v1/user', {
        system_user_id: 'a',
        system_uuid: randomUUID(),
        full_name: 'x',
        timezone: 'Bad/Zone',
      })
    ).body,
  ]
  for (const body of bodies) t.notMatch(body, /at \w+ \(|node_modules|select |insert |postgres|stack/i)
})

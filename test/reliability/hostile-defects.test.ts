// One test per input defect found by the hostile-input review: each answered 500, stored a
// silently changed value, or answered an unbounded 422. Every one must be a bounded, declared 4xx.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { buildTestApp } from '../helpers/app.js'
import { createOwner, ownerQuery } from '../helpers/fixtures.js'

const api = await buildTestApp(t)
const owner = await createOwner(api)
const q = ownerQuery(owner)
const raw = (url: string, payload: string | Buffer, headers: Record<string, string> = {}) =>
  api.request({ method: 'POST', url, payload, headers: { 'content-type': 'application/json', ...headers } })
const firstError = (body: string) => JSON.parse(body).errors[0]

t.test('a 1 MiB batch of 349,000 {} answers a small 422 that names the events limit', async (t) => {
  const payload = `{"events":[${new Array(349_000).fill('{}').join(',')}]}`
  t.ok(Buffer.byteLength(payload) <= 1_048_576, 'fits the body limit')
  const res = await raw('/api/v1/telemetry/docs-search/batch', payload)
  t.equal(res.statusCode, 422)
  t.ok(res.body.length <= 64 * 1024, `body is ${res.body.length} bytes`)
  const errors = res.json().errors
  t.ok(errors.length <= 50)
  t.match(errors[0], { code: 'TELEMETRY_023', details: { loc: ['body', 'events'], type: 'maxItems', input: null } })
})

t.test('a 422 lists at most 50 items, first failures first', async (t) => {
  const events = Array.from({ length: 500 }, () => ({}))
  const res = await api.request({ method: 'POST', url: '/api/v1/telemetry/docs-search/batch', payload: { events } })
  t.equal(res.statusCode, 422)
  const errors = res.json().errors
  t.equal(errors.length, 50)
  t.same(errors[0].details.loc, ['body', 'events', 0, 'event'])
  t.ok(res.body.length <= 64 * 1024)
  const unknown = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, i]))
  const many = await api.request({
    method: 'POST',
    url: '/api/v1/telemetry/docs-search',
    payload: { event: 'e', emitted_at_ms: 1, ...unknown },
  })
  t.equal(many.statusCode, 422)
  t.equal(many.json().errors.length, 50)
  t.equal(many.json().errors[0].code, 'TELEMETRY_020')
})

t.test('details.input echoes scalars, short containers only, and strings cut to 256 characters', async (t) => {
  const long = await api.post('/api/v1/user', {
    system_user_id: 'x'.repeat(5000),
    system_uuid: randomUUID(),
    full_name: 'n',
  })
  t.equal(long.statusCode, 422)
  t.equal(firstError(long.body).details.input, 'x'.repeat(256))
  const bigBullets = Array.from({ length: 51 }, (_, i) => `bullet number ${i} with some text`)
  const big = await api.post('/api/v1/conspectuses', {
    ...owner,
    cue_sheet: {},
    dense_paragraph: 'p',
    bullets: bigBullets,
  })
  t.equal(big.statusCode, 422)
  t.match(firstError(big.body), { code: 'CONS_011', details: { type: 'maxItems', input: null } })
  const small = await api.post('/api/v1/conspectuses', {
    ...owner,
    cue_sheet: [1, 2],
    dense_paragraph: 'p',
    bullets: [],
  })
  t.equal(small.statusCode, 422)
  t.same(firstError(small.body).details.input, [1, 2])
})

t.test('NUL in path or query parameters is 422 COMMON_422', async (t) => {
  for (const url of [
    `/api/v1/user/${owner.system_uuid}/a%00b`,
    `/api/v1/conspectuses/due?system_user_id=a%00b&system_uuid=${owner.system_uuid}`,
    `/api/v1/errors?system_user_id=a%00b&system_uuid=${owner.system_uuid}`,
  ]) {
    const res = await api.get(url)
    t.equal(res.statusCode, 422, url)
    t.equal(firstError(res.body).code, 'COMMON_422', url)
  }
})

t.test(
  'header parameters: a NUL in Idempotency-Key is 400, an odd X-Request-Id is replaced, not refused',
  async (t) => {
    const key = await api.post(
      '/api/v1/user',
      { system_user_id: 'h', system_uuid: randomUUID(), full_name: 'n' },
      'a\u0000b',
    )
    t.equal(key.statusCode, 400)
    t.equal(key.json().key, 'IDEMPOTENCY_KEY_INVALID')
    const id = await api.request({ method: 'GET', url: '/live', headers: { 'x-request-id': 'a\u0000b' } })
    t.equal(id.statusCode, 200)
    t.not(id.headers['x-request-id'], 'a\u0000b')
  },
)

t.test("lone surrogates are refused: body 422 with the field's code and place, query 422 COMMON_422", async (t) => {
  const tel = await raw('/api/v1/telemetry/docs-search', '{"event":"e","emitted_at_ms":1,"payload":{"k":"\\ud800"}}')
  t.equal(tel.statusCode, 422)
  t.match(firstError(tel.body), { code: 'TELEMETRY_019', details: { loc: ['body', 'payload', 'k'] } })
  const cue = await raw(
    '/api/v1/conspectuses',
    JSON.stringify({ ...owner, cue_sheet: { '\udc00': 1 }, dense_paragraph: 'p', bullets: [] }),
    { 'idempotency-key': randomUUID() },
  )
  t.equal(cue.statusCode, 422)
  t.match(
    firstError(cue.body),
    { code: 'CONS_007', details: { loc: ['body', 'cue_sheet'] } },
    'a bad property name: the loc stops at its object',
  )
  const paired = await raw(
    '/api/v1/telemetry/docs-search',
    '{"event":"e","emitted_at_ms":1,"payload":{"k":"\\ud83d\\ude00"}}',
  )
  t.equal(paired.statusCode, 202, 'a surrogate pair is an ordinary character')
  // An encoded surrogate is not UTF-8: the query parser keeps the text as sent, never U+FFFD.
  const query = await api.get(`/api/v1/conspectuses/due?system_user_id=%ED%A0%80&system_uuid=${owner.system_uuid}`)
  t.equal(query.statusCode, 404)
  const escaped = await api.get(
    `/api/v1/errors?system_user_id=${encodeURIComponent('a')}&system_uuid=${owner.system_uuid}&cursor=%ED%A0%80`,
  )
  t.equal(escaped.statusCode, 422)
})

t.test('a body that is not valid UTF-8 is refused, never stored with U+FFFD', async (t) => {
  const id = `utf-${randomUUID().slice(0, 8)}`
  const body = Buffer.concat([
    Buffer.from(`{"system_user_id":"${id}","system_uuid":"${randomUUID()}","full_name":"`),
    Buffer.from([0xc3, 0x28, 0xff]),
    Buffer.from('"}'),
  ])
  const res = await raw('/api/v1/user', body, { 'idempotency-key': randomUUID() })
  t.equal(res.statusCode, 422)
  t.equal(firstError(res.body).code, 'USER_013')
  const [{ n }] = (await api.db.sql`select count(*)::int as n from users where system_user_id = ${id}`) as unknown as [
    { n: number },
  ]
  t.equal(n, 0)
})

t.test('non-finite and unsafe JSON numbers are refused in place', async (t) => {
  for (const number of ['1e400', '-1e400', '9007199254740993', '-9007199254740993']) {
    const res = await raw('/api/v1/telemetry/docs-search', `{"event":"e","emitted_at_ms":1,"payload":{"n":${number}}}`)
    t.equal(res.statusCode, 422, number)
    t.match(firstError(res.body), { code: 'TELEMETRY_019', details: { loc: ['body', 'payload', 'n'] } }, number)
  }
  const ok = await raw(
    '/api/v1/telemetry/docs-search',
    '{"event":"e","emitted_at_ms":1,"payload":{"n":9007199254740991,"f":1.5e300}}',
  )
  t.equal(ok.statusCode, 422, '1.5e300 is integer-valued and beyond the safe range')
  const fine = await raw(
    '/api/v1/telemetry/docs-search',
    '{"event":"e","emitted_at_ms":1,"payload":{"n":9007199254740991,"f":0.1}}',
  )
  t.equal(fine.statusCode, 202)
})

t.test('emitted_at_ms past 9999-12-31 is a 422 naming the event index, not a 500 for the batch', async (t) => {
  const events = [0, 1, 2, 3].map((i) => ({ event: 'search_query', emitted_at_ms: i === 3 ? 1e15 : 1 }))
  const res = await api.request({ method: 'POST', url: '/api/v1/telemetry/docs-search/batch', payload: { events } })
  t.equal(res.statusCode, 422)
  t.match(firstError(res.body), { code: 'TELEMETRY_004', details: { loc: ['body', 'events', 3, 'emitted_at_ms'] } })
  const edge = await api.request({
    method: 'POST',
    url: '/api/v1/telemetry/docs-search',
    payload: { event: 'e', emitted_at_ms: 253402300799999 },
  })
  t.equal(edge.statusCode, 202)
  const past = await api.request({
    method: 'POST',
    url: '/api/v1/telemetry/docs-search',
    payload: { event: 'e', emitted_at_ms: 253402300800000 },
  })
  t.equal(past.statusCode, 422)
})

t.test('query numbers that are not finite integers in range are 422 COMMON_422', async (t) => {
  for (const value of ['Infinity', '-Infinity', '1e400', 'abc', 'NaN', '1.5', '9007199254740993']) {
    for (const url of [
      `/api/v1/conspectuses/due?${q}&limit=${value}`,
      `/api/v1/errors?${q}&limit=${value}`,
      `/api/v1/telemetry/docs-search/metrics?window_minutes=${value}`,
    ]) {
      const res = await api.get(url)
      t.equal(res.statusCode, 422, url)
      t.equal(firstError(res.body).code, 'COMMON_422', url)
    }
  }
})

t.test('as_of outside 0001..9999 after the offset, or on a leap second, is 422 COMMON_422', async (t) => {
  for (const asOf of [
    '2016-12-31T23:59:60Z',
    '0000-01-01T00:00:00Z',
    '0001-01-01T00:30:00+01:00',
    '9999-12-31T23:59:59-01:00',
    '10000-01-01T00:00:00Z',
  ]) {
    for (const path of ['/api/v1/conspectuses/due', '/api/v1/schedule/summary']) {
      const res = await api.get(`${path}?${q}&as_of=${encodeURIComponent(asOf)}`)
      t.equal(res.statusCode, 422, `${path} ${asOf}`)
      t.equal(firstError(res.body).code, 'COMMON_422')
    }
  }
  for (const asOf of ['0001-01-01T00:00:00Z', '9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59+01:00']) {
    const res = await api.get(`/api/v1/schedule/summary?${q}&as_of=${encodeURIComponent(asOf)}`)
    t.equal(res.statusCode, 200, asOf)
  }
})

t.test('a cursor that decodes to a position the service never issues is 422 COMMON_422', async (t) => {
  const cursor = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
  for (const position of [
    ['0000-01-01T00:00:00.000000Z', randomUUID()],
    ['2026-02-31T00:00:00.000000Z', randomUUID()],
    ['2026-01-01T24:00:00.000000Z', randomUUID()],
    ['2026-01-01T23:59:60.000000Z', randomUUID()],
  ]) {
    const res = await api.get(`/api/v1/errors?${q}&cursor=${cursor(position)}`)
    t.equal(res.statusCode, 422, String(position[0]))
    t.equal(firstError(res.body).code, 'COMMON_422')
  }
  const good = await api.get(`/api/v1/errors?${q}&cursor=${cursor(['2026-01-01T00:00:00.123456Z', randomUUID()])}`)
  t.equal(good.statusCode, 200)
})

t.test('application/json with a charset other than utf-8 is 415', async (t) => {
  for (const type of [
    'application/json; charset=latin1',
    'application/json; charset=ISO-8859-1',
    'application/json;charset="utf-16"',
  ]) {
    const res = await raw('/api/v1/telemetry/docs-search', '{"event":"e","emitted_at_ms":1}', { 'content-type': type })
    t.equal(res.statusCode, 415, type)
  }
  for (const type of [
    'application/json; charset=utf-8',
    'application/json; charset=UTF-8',
    'application/json;charset="utf-8"',
  ]) {
    const res = await raw('/api/v1/telemetry/docs-search', '{"event":"e","emitted_at_ms":1}', { 'content-type': type })
    t.equal(res.statusCode, 202, type)
  }
})

t.test('telemetry payload and top_results are capped', async (t) => {
  const post = (extra: Record<string, unknown>) =>
    api.request({
      method: 'POST',
      url: '/api/v1/telemetry/docs-search',
      payload: { event: 'e', emitted_at_ms: 1, ...extra },
    })
  const bigPayload = await post({ payload: { s: 'x'.repeat(16_400) } })
  t.equal(bigPayload.statusCode, 422)
  t.equal(firstError(bigPayload.body).code, 'TELEMETRY_019')
  const manyResults = await post({ top_results: Array.from({ length: 51 }, (_, i) => ({ rank: i })) })
  t.equal(manyResults.statusCode, 422)
  t.equal(firstError(manyResults.body).code, 'TELEMETRY_018')
  const heavyResults = await post({ top_results: [{ s: 'x'.repeat(16_400) }] })
  t.equal(heavyResults.statusCode, 422)
  t.equal(firstError(heavyResults.body).code, 'TELEMETRY_018')
  const inBatch = await api.request({
    method: 'POST',
    url: '/api/v1/telemetry/docs-search/batch',
    payload: {
      events: [
        { event: 'e', emitted_at_ms: 1 },
        { event: 'e', emitted_at_ms: 1, payload: { s: 'x'.repeat(16_400) } },
      ],
    },
  })
  t.equal(inBatch.statusCode, 422)
  t.match(firstError(inBatch.body), { code: 'TELEMETRY_019', details: { loc: ['body', 'events', 1, 'payload'] } })
  t.equal(
    (await post({ payload: { s: 'x'.repeat(16_000) }, top_results: Array.from({ length: 50 }, () => ({})) }))
      .statusCode,
    202,
  )
})

// API key, rate limit, body limit, content type, request id and unknown routes.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { buildTestApp, API_KEY } from '../helpers/app.js'

const userBody = () => ({
  system_user_id: `c-${randomUUID().slice(0, 8)}`,
  system_uuid: randomUUID(),
  full_name: 'Cross Cutting',
})

t.test('business routes need a configured X-API-Key; probes and docs do not', async (t) => {
  const api = await buildTestApp(t)
  for (const key of [null, 'wrong-key', '']) {
    const res = await api.request({ method: 'GET', url: `/api/v1/user/${randomUUID()}/x`, key })
    t.equal(res.statusCode, 401, `key ${JSON.stringify(key)}`)
    t.same(res.json(), {
      code: 'COMMON_401',
      key: 'SECURITY_AUTH_REQUIRED',
      message: 'A valid X-API-Key header is required.',
      source: 'security',
    })
  }
  t.equal(
    (await api.request({ method: 'GET', url: `/api/v1/user/${randomUUID()}/x`, key: 'test-key-2' })).statusCode,
    404,
    'every configured key works',
  )
  for (const url of ['/live', '/ready', '/metrics', '/openapi.json', '/arazzo.yaml']) {
    t.equal((await api.request({ method: 'GET', url, key: null })).statusCode, 200, url)
  }
})

t.test('401 comes before 413 and 422: the body of an unauthenticated request is not read', async (t) => {
  const api = await buildTestApp(t, { BODY_LIMIT_BYTES: '1024' })
  const res = await api.request({
    method: 'POST',
    url: '/api/v1/user',
    key: null,
    payload: { full_name: 'x'.repeat(5000) },
  })
  t.equal(res.statusCode, 401)
})

t.test('the rate limit answers 429 with Retry-After and X-RateLimit-* before the key check', async (t) => {
  const api = await buildTestApp(t, { RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW_MS: '60000' })
  const url = `/api/v1/user/${randomUUID()}/limited`
  // No key at all: the address's window counts these, and the fourth is 429, not 401.
  const answers = []
  for (let i = 0; i < 4; i++) answers.push(await api.request({ method: 'GET', url, key: null }))
  t.same(
    answers.map((r) => r.statusCode),
    [401, 401, 401, 429],
  )
  t.same(
    answers.map((r) => r.headers['x-ratelimit-remaining']),
    ['2', '1', '0', '0'],
  )
  const limited = answers[3]!
  t.same(limited.json(), {
    code: 'COMMON_429',
    key: 'SECURITY_RATE_LIMIT_EXCEEDED',
    message: 'Rate limit exceeded; retry after the number of seconds in Retry-After.',
    source: 'security',
  })
  t.equal(limited.headers['x-ratelimit-limit'], '3')
  t.ok(Number(limited.headers['retry-after']) > 0 && Number(limited.headers['retry-after']) <= 60)
  t.equal(limited.headers['x-ratelimit-reset'], limited.headers['retry-after'])
  t.same(
    answers.map((r) => [r.headers['ratelimit-policy'], r.headers.ratelimit]),
    answers.map((r) => [
      '"default";q=3;w=60',
      `"default";r=${r.headers['x-ratelimit-remaining']};t=${r.headers['x-ratelimit-reset']}`,
    ]),
    'the IETF fields on every limited answer (401s and the 429) agree with X-RateLimit-*',
  )
  t.equal(
    (await api.request({ method: 'GET', url, key: 'wrong' })).statusCode,
    429,
    'a made-up key counts against the address',
  )
  const keyed = []
  for (let i = 0; i < 4; i++) keyed.push((await api.get(url)).statusCode)
  t.same(keyed, [404, 404, 404, 429], 'a configured key has its own window')
  t.equal(
    (await api.request({ method: 'GET', url, key: 'test-key-2' })).statusCode,
    404,
    'each API key has its own window',
  )
  t.equal((await api.request({ method: 'GET', url: '/live', key: null })).statusCode, 200, 'probes are not limited')
})

t.test('bodies over BODY_LIMIT_BYTES are 413, with or without Content-Length', async (t) => {
  const api = await buildTestApp(t, { BODY_LIMIT_BYTES: '2048' })
  const big = JSON.stringify({ ...userBody(), full_name: 'x'.repeat(4000) })
  const sized = await api.request({
    method: 'POST',
    url: '/api/v1/user',
    payload: big,
    headers: { 'content-type': 'application/json', 'idempotency-key': 'b1' },
  })
  t.equal(sized.statusCode, 413)
  t.same(sized.json(), {
    code: 'COMMON_413',
    key: 'SECURITY_REQUEST_BODY_TOO_LARGE',
    message: 'The request body is larger than the allowed maximum.',
    source: 'security',
  })
  const { Readable } = await import('node:stream')
  const chunked = await api.request({
    method: 'POST',
    url: '/api/v1/user',
    payload: Readable.from([big.slice(0, 1500), big.slice(1500)]),
    headers: { 'content-type': 'application/json', 'idempotency-key': 'b2' },
  })
  t.equal(chunked.statusCode, 413)
  t.equal(chunked.json().code, 'COMMON_413')
})

t.test('non-JSON bodies are 415 COMMON_415', async (t) => {
  const api = await buildTestApp(t)
  for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
    const res = await api.request({
      method: 'POST',
      url: '/api/v1/user',
      payload: 'a=b',
      headers: { 'content-type': type, 'idempotency-key': 'x' },
    })
    t.equal(res.statusCode, 415, type)
    t.equal(res.json().code, 'COMMON_415')
  }
})

t.test('X-Request-Id is echoed when printable ASCII up to 128, replaced otherwise', async (t) => {
  const api = await buildTestApp(t)
  const echoed = await api.request({ method: 'GET', url: '/live', headers: { 'x-request-id': 'trace-123' } })
  t.equal(echoed.headers['x-request-id'], 'trace-123')
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
  t.match((await api.get('/live')).headers['x-request-id'], uuid, 'generated when absent')
  t.match(
    (await api.request({ method: 'GET', url: '/live', headers: { 'x-request-id': 'x'.repeat(129) } })).headers[
      'x-request-id'
    ],
    uuid,
  )
  t.match(
    (await api.request({ method: 'GET', url: '/live', headers: { 'x-request-id': 'zürich' } })).headers['x-request-id'],
    uuid,
  )
  const error = await api.request({
    method: 'GET',
    url: `/api/v1/user/${randomUUID()}/x`,
    key: null,
    headers: { 'x-request-id': 'err-1' },
  })
  t.equal(error.headers['x-request-id'], 'err-1', 'errors carry it too')
})

t.test('unknown routes are 404 COMMON_404 with a request id', async (t) => {
  const api = await buildTestApp(t)
  const res = await api.request({ method: 'GET', url: '/api/v2/nothing' })
  t.equal(res.statusCode, 404)
  t.same(res.json(), {
    code: 'COMMON_404',
    key: 'ROUTE_NOT_FOUND',
    message: 'No route matches this method and path.',
    source: 'business',
  })
  t.ok(res.headers['x-request-id'])
})

t.test('an API key is accepted only as the exact configured string', async (t) => {
  const api = await buildTestApp(t)
  for (const key of [`${API_KEY} `, API_KEY.toUpperCase(), API_KEY.slice(0, -1)]) {
    t.equal(
      (await api.request({ method: 'GET', url: `/api/v1/user/${randomUUID()}/x`, key })).statusCode,
      401,
      JSON.stringify(key),
    )
  }
})

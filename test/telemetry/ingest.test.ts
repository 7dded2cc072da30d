// Ingest: one event or a batch, defaults applied, all-or-nothing validation, CORS.
import t from 'tap'
import { buildTestApp } from '../helpers/app.js'

const api = await buildTestApp(t, { CORS_ORIGINS: 'https://docs.example.com' })
const post = (url: string, payload: unknown, headers: Record<string, string> = {}) =>
  api.request({ method: 'POST', url, payload: payload as object, headers })
const count = async () => (await api.db.sql`select count(*)::int as n from docs_search_events`)[0]!.n as number

t.test('one event is stored with defaults for omitted fields; top_results and payload kept', async (t) => {
  const res = await post('/api/v1/telemetry/docs-search', {
    event: 'search_query',
    emitted_at_ms: 1795400000000,
    query_id: 'single-1',
    top_results: [{ url: '/docs/a', rank: 1 }],
    payload: { experiment: 'b', nested: { x: 1 } },
  })
  t.equal(res.statusCode, 202)
  t.same(res.json(), { accepted: 1 })
  t.notOk(res.headers['idempotent-replayed'])
  const [row] = await api.db.sql`select * from docs_search_events where query_id = 'single-1'`
  t.match(row, {
    event: 'search_query',
    emitted_at_ms: '1795400000000',
    page_path: '',
    session_id: '',
    query_text: '',
    query_len: 0,
    tokens_count: 0,
    results_count: 0,
    result_rank: 0,
    result_url: '',
    latency_ms: 0,
    time_to_success_ms: 0,
    time_to_click_ms: 0,
    source: '',
    top_results: [{ url: '/docs/a', rank: 1 }],
    payload: { experiment: 'b', nested: { x: 1 } },
  })
})

t.test('ingest needs no Idempotency-Key and stores each call', async (t) => {
  const before = await count()
  const event = { event: 'search_query', emitted_at_ms: 1, query_id: 'dup' }
  await post('/api/v1/telemetry/docs-search', event)
  await post('/api/v1/telemetry/docs-search', event)
  t.equal(await count(), before + 2)
})

t.test('every bound is checked, with the TELEMETRY code of the field', async (t) => {
  const cases: [Record<string, unknown>, string, string][] = [
    [{ emitted_at_ms: 1 }, 'TELEMETRY_001', 'event'],
    [{ event: '', emitted_at_ms: 1 }, 'TELEMETRY_002', 'event'],
    [{ event: 'e'.repeat(65), emitted_at_ms: 1 }, 'TELEMETRY_002', 'event'],
    [{ event: 'x' }, 'TELEMETRY_003', 'emitted_at_ms'],
    [{ event: 'x', emitted_at_ms: -1 }, 'TELEMETRY_004', 'emitted_at_ms'],
    [{ event: 'x', emitted_at_ms: 1.5 }, 'TELEMETRY_004', 'emitted_at_ms'],
    [{ event: 'x', emitted_at_ms: 1, page_path: 'p'.repeat(513) }, 'TELEMETRY_005', 'page_path'],
    [{ event: 'x', emitted_at_ms: 1, session_id: 's'.repeat(129) }, 'TELEMETRY_006', 'session_id'],
    [{ event: 'x', emitted_at_ms: 1, query_id: 'q'.repeat(129) }, 'TELEMETRY_007', 'query_id'],
    [{ event: 'x', emitted_at_ms: 1, query_text: 'q'.repeat(1025) }, 'TELEMETRY_008', 'query_text'],
    [{ event: 'x', emitted_at_ms: 1, query_len: 1025 }, 'TELEMETRY_009', 'query_len'],
    [{ event: 'x', emitted_at_ms: 1, tokens_count: 129 }, 'TELEMETRY_010', 'tokens_count'],
    [{ event: 'x', emitted_at_ms: 1, results_count: 10001 }, 'TELEMETRY_011', 'results_count'],
    [{ event: 'x', emitted_at_ms: 1, result_rank: -1 }, 'TELEMETRY_012', 'result_rank'],
    [{ event: 'x', emitted_at_ms: 1, result_url: 'u'.repeat(1025) }, 'TELEMETRY_013', 'result_url'],
    [{ event: 'x', emitted_at_ms: 1, latency_ms: 60001 }, 'TELEMETRY_014', 'latency_ms'],
    [{ event: 'x', emitted_at_ms: 1, time_to_success_ms: 86400001 }, 'TELEMETRY_015', 'time_to_success_ms'],
    [{ event: 'x', emitted_at_ms: 1, time_to_click_ms: '5' }, 'TELEMETRY_016', 'time_to_click_ms'],
    [{ event: 'x', emitted_at_ms: 1, source: 's'.repeat(65) }, 'TELEMETRY_017', 'source'],
    [{ event: 'x', emitted_at_ms: 1, top_results: ['not an object'] }, 'TELEMETRY_018', 'top_results'],
    [{ event: 'x', emitted_at_ms: 1, payload: [1] }, 'TELEMETRY_019', 'payload'],
    [{ event: 'x', emitted_at_ms: 1, extra: true }, 'TELEMETRY_020', 'extra'],
  ]
  for (const [body, code, field] of cases) {
    const res = await post('/api/v1/telemetry/docs-search', body)
    t.equal(res.statusCode, 422, JSON.stringify(body).slice(0, 60))
    t.match(res.json().errors[0], { code, field })
  }
  const notObject = await post('/api/v1/telemetry/docs-search', [1])
  t.equal(notObject.json().errors[0].code, 'TELEMETRY_021')
})

t.test('a batch is all or nothing; loc names the bad event by index', async (t) => {
  const before = await count()
  const events = Array.from({ length: 6 }, (_, i) => ({ event: 'search_query', emitted_at_ms: 1000 + i }))
  events[3] = { ...events[3]!, query_len: 5000 } as never
  events[5] = { ...events[5]!, emitted_at_ms: -5 }
  const res = await post('/api/v1/telemetry/docs-search/batch', { events })
  t.equal(res.statusCode, 422)
  t.same(
    res.json().errors.map((e: { code: string; details: { loc: unknown } }) => [e.code, e.details.loc]),
    [
      ['TELEMETRY_009', ['body', 'events', 3, 'query_len']],
      ['TELEMETRY_004', ['body', 'events', 5, 'emitted_at_ms']],
    ],
  )
  t.equal(await count(), before, 'nothing stored')
})

t.test('a batch holds 1..500 events', async (t) => {
  const event = { event: 'search_query', emitted_at_ms: 7 }
  t.equal((await post('/api/v1/telemetry/docs-search/batch', { events: Array(500).fill(event) })).json().accepted, 500)
  const codes = async (body: unknown) =>
    (await post('/api/v1/telemetry/docs-search/batch', body)).json().errors.map((e: { code: string }) => e.code)
  t.same(await codes({ events: [] }), ['TELEMETRY_023'])
  t.same(await codes({ events: Array(501).fill(event) }), ['TELEMETRY_023'])
  t.same(await codes({}), ['TELEMETRY_022'])
  t.same(await codes({ events: [event], more: 1 }), ['TELEMETRY_020'])
})

t.test('CORS: preflight and responses for the configured origin on ingest routes only', async (t) => {
  const preflight = await api.app.inject({
    method: 'OPTIONS',
    url: '/api/v1/telemetry/docs-search/batch',
    headers: {
      origin: 'https://docs.example.com',
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'x-api-key,content-type',
    },
  })
  t.equal(preflight.statusCode, 204)
  t.equal(preflight.headers['access-control-allow-origin'], 'https://docs.example.com')
  t.match(String(preflight.headers['access-control-allow-headers']), /X-API-Key/)
  t.match(String(preflight.headers['access-control-allow-methods']), /POST/)

  const actual = await post(
    '/api/v1/telemetry/docs-search',
    { event: 'x', emitted_at_ms: 1 },
    { origin: 'https://docs.example.com' },
  )
  t.equal(actual.headers['access-control-allow-origin'], 'https://docs.example.com')

  const stranger = await post(
    '/api/v1/telemetry/docs-search',
    { event: 'x', emitted_at_ms: 1 },
    { origin: 'https://evil.example.net' },
  )
  t.notOk(stranger.headers['access-control-allow-origin'])
  const users = await api.app.inject({
    method: 'OPTIONS',
    url: '/api/v1/user',
    headers: { origin: 'https://docs.example.com', 'access-control-request-method': 'POST' },
  })
  t.equal(users.statusCode, 204, 'other routes answer OPTIONS with their Allow, not a CORS preflight')
  t.equal(users.headers.allow, 'POST, OPTIONS')
  t.notOk(users.headers['access-control-allow-origin'])
  t.notOk(users.headers['access-control-allow-methods'])
})

t.test('telemetry routes need the API key', async (t) => {
  const res = await api.request({
    method: 'POST',
    url: '/api/v1/telemetry/docs-search',
    key: null,
    payload: { event: 'x', emitted_at_ms: 1 },
  })
  t.equal(res.statusCode, 401)
  t.equal(
    (await api.request({ method: 'GET', url: '/api/v1/telemetry/docs-search/metrics', key: null })).statusCode,
    401,
  )
})

// The docs-search analytics operations over HTTP: a hand-made fixture with known answers (each
// answer checked against the contract), the default range, TELEMETRY_MIN_SESSIONS, and the
// ranges answered 422.
import t from 'tap'
import { buildTestApp } from '../helpers/app.js'
import { manualClock } from '../helpers/fixtures.js'

const clock = manualClock('2026-11-27T15:00:00Z')
const api = await buildTestApp(t, {}, { now: clock.now })
const base = '/api/v1/telemetry/docs-search/analytics'
const at = (iso: string) => Date.parse(iso)

const search = (query_id: string, query_text: string, session_id: string, iso: string, results_count = 3) => ({
  event: 'search_query',
  emitted_at_ms: at(iso),
  query_id,
  query_text,
  session_id,
  results_count,
})
const click = (query_id: string, iso: string, result_rank: number) => ({
  event: 'search_result_click',
  emitted_at_ms: at(iso),
  query_id,
  result_rank,
})

const ingest = await api.post('/api/v1/telemetry/docs-search/batch', {
  events: [
    // "install": three sessions, two days, two clicks on one search
    search('q1', 'Install', 's1', '2026-11-26T10:00:00Z'),
    click('q1', '2026-11-26T10:00:05Z', 1),
    click('q1', '2026-11-26T10:00:09Z', 3),
    search('q2', '  install ', 's2', '2026-11-27T09:00:00Z'),
    search('q3', 'INSTALL', '', '2026-11-27T09:30:00Z', 0),
    // "sso  setup": two sessions, no results
    search('q4', 'SSO  setup', 's1', '2026-11-27T11:00:00Z', 0),
    search('q5', 'sso setup', 's3', '2026-11-27T11:10:00Z', 0),
    // one visitor's own search: counted, never listed
    search('q6', 'jane@example.com', 's9', '2026-11-27T12:00:00Z', 0),
    click('q6', '2026-11-27T12:00:02Z', 25),
    // before the range
    search('q7', 'install', 's4', '2026-11-19T23:59:59Z'),
  ],
})
// The analytics answer from the rollup as of its last refresh (every minute in the service).
await api.app.analyticsRollup.refresh()
t.equal(ingest.statusCode, 202)
const range = 'from=2026-11-21&to=2026-11-27'

t.test('top searches: normalised, counted, rates and positions', async (t) => {
  const res = await api.get(`${base}/searches?${range}`)
  t.equal(res.statusCode, 200)
  t.same(res.json(), {
    from: '2026-11-21',
    to: '2026-11-27',
    items: [
      {
        query: 'install',
        count: 3,
        no_result_count: 1,
        with_click_count: 1,
        click_through_rate: 1 / 3,
        average_click_position: 2,
      },
      {
        query: 'sso setup',
        count: 2,
        no_result_count: 2,
        with_click_count: 0,
        click_through_rate: 0,
        average_click_position: null,
      },
    ],
  })
  t.same((await api.get(`${base}/searches?${range}&limit=1`)).json().items.length, 1, 'limit')
})

t.test('no-result and no-click searches', async (t) => {
  t.same((await api.get(`${base}/searches/no-results?${range}`)).json().items, [
    { query: 'sso setup', count: 2 },
    { query: 'install', count: 1 },
  ])
  t.same((await api.get(`${base}/searches/no-clicks?${range}`)).json().items, [{ query: 'install', count: 1 }])
})

t.test('click positions in 12 buckets', async (t) => {
  const { positions } = (await api.get(`${base}/clicks/positions?${range}`)).json()
  t.equal(positions.length, 12)
  t.same(positions[0], { from_rank: 1, to_rank: 1, clicks: 1 })
  t.same(positions[2], { from_rank: 3, to_rank: 3, clicks: 1 })
  t.same(positions[11], { from_rank: 21, to_rank: null, clicks: 1 })
})

t.test('the series: a point per day, null rates without searches, totals include unlisted queries', async (t) => {
  const body = (await api.get(`${base}/series?${range}`)).json()
  t.equal(body.granularity, 'day')
  t.equal(body.points.length, 7)
  t.same(body.points[0], {
    start: '2026-11-21T00:00:00.000Z',
    total_queries: 0,
    zero_result_queries: 0,
    queries_with_click: 0,
    query_ctr: null,
    zero_result_rate: null,
  })
  t.same(body.points[5], {
    start: '2026-11-26T00:00:00.000Z',
    total_queries: 1,
    zero_result_queries: 0,
    queries_with_click: 1,
    query_ctr: 1,
    zero_result_rate: 0,
  })
  t.same(body.points[6], {
    start: '2026-11-27T00:00:00.000Z',
    total_queries: 5,
    zero_result_queries: 4,
    queries_with_click: 1,
    query_ctr: 0.2,
    zero_result_rate: 0.8,
  })
  const hourly = (await api.get(`${base}/series?from=2026-11-27&to=2026-11-27&granularity=hour`)).json()
  t.equal(hourly.points.length, 24)
  t.equal(hourly.points[9].total_queries, 2)
})

t.test('the default range is the last 7 days, today included', async (t) => {
  const body = (await api.get(`${base}/series`)).json()
  t.same([body.from, body.to, body.points.length], ['2026-11-21', '2026-11-27', 7])
  t.same((await api.get(`${base}/searches?to=2026-11-26`)).json().from, '2026-11-20')
})

t.test('ranges the operations refuse: 422 COMMON_422', async (t) => {
  for (const query of [
    'from=2026-11-27&to=2026-11-26',
    'from=2026-08-01&to=2026-11-27',
    'from=2026-02-30',
    'to=yesterday',
    'limit=0',
    'limit=1001',
  ]) {
    const res = await api.get(`${base}/searches?${query}`)
    t.equal(res.statusCode, 422, query)
    t.equal(res.json().errors[0].code, 'COMMON_422', query)
  }
  t.equal((await api.get(`${base}/searches?from=2026-08-30&to=2026-11-27`)).statusCode, 200, '90 days')
  t.equal(
    (await api.get(`${base}/series?from=2026-11-20&to=2026-11-27&granularity=hour`)).statusCode,
    422,
    '8 days hourly',
  )
  t.equal(
    (await api.get(`${base}/series?from=2026-11-21&to=2026-11-27&granularity=hour`)).statusCode,
    200,
    '7 days hourly',
  )
  t.equal((await api.get(`${base}/series?granularity=week`)).statusCode, 422)
})

t.test('TELEMETRY_MIN_SESSIONS sets how many sessions a listed query needs', async (t) => {
  const strict = await buildTestApp(t, { TELEMETRY_MIN_SESSIONS: '3' }, { now: clock.now })
  await strict.post('/api/v1/telemetry/docs-search/batch', {
    events: [
      search('a', 'install', 's1', '2026-11-27T09:00:00Z'),
      search('b', 'install', 's2', '2026-11-27T09:00:00Z'),
      search('c', 'install', '', '2026-11-27T09:00:00Z'),
      search('d', 'sso setup', 's1', '2026-11-27T09:00:00Z'),
      search('e', 'sso setup', 's2', '2026-11-27T09:00:00Z'),
    ],
  })
  await strict.app.analyticsRollup.refresh()
  t.same(
    (await strict.get(`${base}/searches?${range}`)).json().items.map((i: { query: string }) => i.query),
    ['install'],
  )
})

t.test('the scope telemetry:read is required', async (t) => {
  const res = await api.request({ method: 'GET', url: `${base}/searches`, key: null })
  t.equal(res.statusCode, 401)
})

// Erasure of one visitor's raw events: only that session's, in every partition (DEFAULT too),
// idempotent, logged with the key id, behind its own scope, index-backed; the KPI counts stay;
// the analytics rollup forgets the session at the refresh the erasure starts.
import t from 'tap'
import { API_KEY, buildTestApp } from '../helpers/app.js'
import { manualClock } from '../helpers/fixtures.js'
import { writeKeyFile } from '../helpers/keys.js'
import { buildAppWithLogLines } from '../helpers/logged-app.js'

const START = '2026-11-22T12:00:00.000Z'
const NOW = Date.parse(START)
const DAY = 86_400_000
const clock = manualClock(START)

const keyFile = await writeKeyFile(t, [
  { id: 'ingest-only', secret: 'ssk_ingest', scopes: ['telemetry:ingest'] },
  { id: 'everything-else', secret: 'ssk_unscoped' },
  { id: 'eraser', secret: 'ssk_eraser', scopes: ['telemetry:erase'] },
])
const api = await buildTestApp(t, { API_KEYS_FILE: keyFile }, { now: clock.now })
const { sql } = api.db
const erase = (session: string, key: string = API_KEY) =>
  api.request({ method: 'DELETE', url: `/api/v1/telemetry/docs-search/sessions/${encodeURIComponent(session)}`, key })
const countOf = async (session: string) =>
  (await sql`select count(*)::int as n from docs_search_events where session_id = ${session}`)[0]!.n as number

const events = (session: string, n: number, spreadDays = 3) =>
  Array.from({ length: n }, (_, i) => ({
    event: i % 2 ? 'search_result_click' : 'search_query',
    emitted_at_ms: NOW - (i % spreadDays) * DAY - i * 1000,
    session_id: session,
    query_id: `${session}-q${Math.floor(i / 2)}`,
    query_text: 'how do I rotate keys',
  }))

t.test('erasure removes that session raw events in every partition and nobody else', async (t) => {
  await api.request({
    method: 'POST',
    url: '/api/v1/telemetry/docs-search/batch',
    payload: { events: events('visitor/é 1', 300) },
  })
  await api.request({
    method: 'POST',
    url: '/api/v1/telemetry/docs-search/batch',
    payload: { events: events('other', 200) },
  })
  await api.request({
    method: 'POST',
    url: '/api/v1/telemetry/docs-search/batch',
    payload: {
      events: [
        { event: 'search_query', emitted_at_ms: 5, session_id: 'visitor/é 1' },
        { event: 'search_query', emitted_at_ms: 5 },
      ],
    },
  })
  const kpisBefore = (await api.get('/api/v1/telemetry/docs-search/metrics?window_minutes=10080')).json()
  const [partitions] =
    await sql`select count(distinct tableoid)::int as n from docs_search_events where session_id = 'visitor/é 1'`
  t.ok(partitions!.n >= 3, `the session spans ${partitions!.n} partitions, the DEFAULT one among them`)

  const res = await erase('visitor/é 1')
  t.equal(res.statusCode, 200)
  t.same(res.json(), { session_id: 'visitor/é 1', erased_events: 301 })
  t.equal(await countOf('visitor/é 1'), 0)
  t.equal(await countOf('other'), 200, 'another session keeps its events')
  t.equal(await countOf(''), 1, 'events without a session are kept')

  const kpisAfter = (await api.get('/api/v1/telemetry/docs-search/metrics?window_minutes=10080')).json()
  t.equal(kpisAfter.total_queries, kpisBefore.total_queries, 'the aggregated KPI counts stay')
  t.equal(kpisAfter.queries_with_click, kpisBefore.queries_with_click)

  const replay = await erase('visitor/é 1')
  t.equal(replay.statusCode, 200)
  t.same(replay.json(), { session_id: 'visitor/é 1', erased_events: 0 }, 'a replay is a no-op')
  t.same((await erase('never-seen')).json(), { session_id: 'never-seen', erased_events: 0 })
})

t.test(
  'the scope telemetry:erase: API_KEYS keys and file keys that name it; not a file key without scopes',
  async (t) => {
    await api.request({
      method: 'POST',
      url: '/api/v1/telemetry/docs-search/batch',
      payload: { events: events('scoped', 4) },
    })
    for (const key of ['ssk_ingest', 'ssk_unscoped']) {
      const res = await erase('scoped', key)
      t.equal(res.statusCode, 403, key)
      t.match(res.json(), { code: 'COMMON_403', key: 'SECURITY_SCOPE_MISSING', source: 'security' })
    }
    t.equal(await countOf('scoped'), 4, 'nothing erased by a refused call')
    const unscopedIngest = await api.request({
      method: 'POST',
      url: '/api/v1/telemetry/docs-search',
      payload: { event: 'x', emitted_at_ms: NOW },
      key: 'ssk_unscoped',
    })
    t.equal(unscopedIngest.statusCode, 202, 'a file key without scopes still holds every other scope')
    t.equal((await erase('scoped', 'ssk_eraser')).json().erased_events, 4)
    t.equal((await erase('scoped', 'nope')).statusCode, 401)
  },
)

t.test('bad session ids answer 422; other methods 405', async (t) => {
  const long = await erase('s'.repeat(129))
  t.equal(long.statusCode, 422)
  const post = await api.request({ method: 'POST', url: '/api/v1/telemetry/docs-search/sessions/abc', payload: {} })
  t.equal(post.statusCode, 405)
  t.equal(post.headers.allow, 'DELETE, OPTIONS')
})

t.test('each partition answers the erasure from its session index', async (t) => {
  const plan = (await sql`explain delete from docs_search_events where session_id = 'x' and session_id <> ''`)
    .map((r) => r['QUERY PLAN'] as string)
    .join('\n')
  t.notMatch(plan, /Seq Scan/, plan)
  t.match(plan, /_session/)
})

t.test('the erasure is logged with the key id, not the session id', async (t) => {
  const { app, lines } = await buildAppWithLogLines(t, 'plain-key')
  const res = await app.inject({
    method: 'DELETE',
    url: '/api/v1/telemetry/docs-search/sessions/private-visitor',
    headers: { 'x-api-key': 'plain-key' },
  })
  t.equal(res.statusCode, 200)
  const line = lines.find((l) => l.msg === 'docs-search session erased')
  t.match(line, { key_id: /^key-[0-9a-f]{12}$/, erased_events: 0 })
  t.notMatch(JSON.stringify(lines), /private-visitor/, 'the session id is in no log line')
})

t.test(
  'an erasure sent with a JSON Content-Type and no body (as curl and most clients send it) is answered',
  async (t) => {
    await api.request({
      method: 'POST',
      url: '/api/v1/telemetry/docs-search/batch',
      payload: { events: events('with-header', 4) },
    })
    const res = await api.request({
      method: 'DELETE',
      url: '/api/v1/telemetry/docs-search/sessions/with-header',
      headers: { 'content-type': 'application/json' },
    })
    t.equal(res.statusCode, 200)
    t.same(res.json(), { session_id: 'with-header', erased_events: 4 })
    t.equal(await countOf('with-header'), 0)
  },
)

t.test('the analytics drop the erased session at the rollup refresh the erasure starts', async (t) => {
  const at = Date.parse('2026-11-21T10:00:00Z')
  const search = (session_id: string, query_id: string, ms: number) => ({
    event: 'search_query',
    emitted_at_ms: ms,
    session_id,
    query_id,
    query_text: 'Private Topic',
    results_count: 4,
  })
  await api.post('/api/v1/telemetry/docs-search/batch', {
    events: [
      search('erase-me', 'pa', at),
      search('stays', 'pb', at + 60_000),
      // the erased session's click on the other session's query id, an hour later
      {
        event: 'search_result_click',
        emitted_at_ms: at + 3_600_000,
        session_id: 'erase-me',
        query_id: 'pb',
        result_rank: 2,
      },
    ],
  })
  await api.app.analyticsRollup.refresh()
  const range = 'from=2026-11-21&to=2026-11-21'
  const searches = async () =>
    (await api.get(`/api/v1/telemetry/docs-search/analytics/searches?${range}&limit=1000`))
      .json()
      .items.filter((row: { query: string }) => row.query === 'private topic')
  const totals = async () => {
    const [day] = (await api.get(`/api/v1/telemetry/docs-search/analytics/series?${range}`)).json().points
    return [day.total_queries, day.queries_with_click]
  }
  t.same(await searches(), [
    {
      query: 'private topic',
      count: 2,
      no_result_count: 0,
      with_click_count: 1,
      click_through_rate: 0.5,
      average_click_position: 2,
    },
  ])
  const [queries, clicked] = await totals()
  t.equal((await erase('erase-me')).json().erased_events, 2)
  await api.app.analyticsRollup.settled()
  t.same(await searches(), [], 'one session left: not listed')
  t.same(await totals(), [queries! - 1, clicked! - 1], 'its search and its click on the other search are gone')
})

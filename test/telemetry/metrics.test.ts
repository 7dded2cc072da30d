// KPI correctness: a hand-made set of events with known answers, and generated events whose
// answer must equal the KPI definitions computed straight over the stored events.
import t from 'tap'
import fc from 'fast-check'
import { buildTestApp } from '../helpers/app.js'
import { manualClock } from '../helpers/fixtures.js'
import { REFERENCE_KPIS } from '../helpers/reference-kpis.js'

const clock = manualClock('2026-11-22T12:00:00Z')
const api = await buildTestApp(t, {}, { now: clock.now })
const NOW = Date.parse('2026-11-22T12:00:00Z')
const min = 60_000

t.test('no events: zero counts, zero rates, null percentiles', async (t) => {
  const res = await api.get('/api/v1/telemetry/docs-search/metrics')
  t.equal(res.statusCode, 200)
  t.same(res.json(), {
    window_minutes: 60,
    total_queries: 0,
    zero_result_queries: 0,
    zero_result_rate: 0,
    queries_with_click: 0,
    query_ctr: 0,
    median_time_to_first_success_ms: null,
    p75_time_to_first_success_ms: null,
  })
})

t.test('every KPI over a window with known answers', async (t) => {
  const q = (query_id: string, at: number, results_count: number, extra = {}) => ({
    event: 'search_query',
    emitted_at_ms: at,
    query_id,
    results_count,
    ...extra,
  })
  const click = (query_id: string, at: number, time_to_success_ms = 0) => ({
    event: 'search_result_click',
    emitted_at_ms: at,
    query_id,
    result_rank: 1,
    time_to_success_ms,
  })
  const events = [
    // In the 60-minute window:
    q('q1', NOW - 10 * min, 5),
    click('q1', NOW - 9 * min, 4000),
    click('q1', NOW - 8 * min, 1500), // q1 clicked; first success 1500
    q('q2', NOW - 20 * min, 0), // zero results, no click
    q('q3', NOW - 30 * min, 3),
    click('q3', NOW - 29 * min, 0), // clicked, no success time
    q('q4', NOW - 40 * min, 0),
    { event: 'search_success', emitted_at_ms: NOW - 39 * min, query_id: 'q4', time_to_success_ms: 9000 }, // success 9000
    q('', NOW - 50 * min, 2),
    click('', NOW - 49 * min, 700), // empty query id: counted as a query, never as a click or success
    q('q5', NOW, 8, { time_to_success_ms: 300 }), // exactly at now: inside; success 300
    click('q6', NOW - 5 * min, 200), // click for a query whose search_query is outside the window: success 200, not a click
    // Outside the window:
    q('q6', NOW - 61 * min, 1),
    q('q7', NOW - 60 * min, 0), // exactly now - 60 min: outside (the window is open at its start)
    click('q2', NOW + 1, 100), // in the future: outside
    q('q8', NOW - 70 * min, 0, { time_to_success_ms: 50 }),
    click('q8', NOW + 2, 60), // events on both sides of the window, none inside
    { event: 'search_query', emitted_at_ms: NOW - 2 * 24 * 60 * min, query_id: 'old', results_count: 0 },
  ]
  const ingest = await api.request({ method: 'POST', url: '/api/v1/telemetry/docs-search/batch', payload: { events } })
  t.equal(ingest.statusCode, 202)
  t.same(ingest.json(), { accepted: events.length })

  const res = await api.get('/api/v1/telemetry/docs-search/metrics?window_minutes=60')
  // queries in window: q1, q2, q3, q4, '', q5 = 6; zero results: q2, q4 = 2
  // clicked: q1, q3 = 2 (q6's query is outside; '' is excluded)
  // first successes: q1 1500, q4 9000, q5 300, q6 200 -> sorted 200, 300, 1500, 9000
  // nearest rank: median = 2nd = 300, p75 = 3rd = 1500
  t.same(res.json(), {
    window_minutes: 60,
    total_queries: 6,
    zero_result_queries: 2,
    zero_result_rate: 2 / 6,
    queries_with_click: 2,
    query_ctr: 2 / 6,
    median_time_to_first_success_ms: 300,
    p75_time_to_first_success_ms: 1500,
  })

  const wide = (await api.get('/api/v1/telemetry/docs-search/metrics?window_minutes=10080')).json()
  // adds q6, q7, 'old' and q8's query (not its future click)
  t.match(wide, { window_minutes: 10080, total_queries: 10, zero_result_queries: 5, queries_with_click: 3 })
})

t.test('window_minutes is 1..10080', async (t) => {
  for (const w of ['0', '10081', 'x']) {
    const res = await api.get(`/api/v1/telemetry/docs-search/metrics?window_minutes=${w}`)
    t.equal(res.statusCode, 422, w)
    t.equal(res.json().errors[0].code, 'COMMON_422')
  }
})

t.test('for any events, in any batches, every window answers as the definitions over the raw events', async (t) => {
  const SEED = Number(process.env.FC_SEED ?? 20261123)
  // Times cluster around the edges of the 1-, 2- and 60-minute windows, where a query's events
  // fall on both sides of an edge and its rolled-up row cannot be used as it is.
  const edges = [0, -min, -2 * min, -60 * min, -120 * min]
  const at = fc.oneof(
    fc.tuple(fc.constantFrom(...edges), fc.integer({ min: -2, max: 2 })).map(([edge, d]) => NOW + edge + d),
    fc.integer({ min: NOW - 130 * min, max: NOW + 2 * min }),
  )
  const event = fc.record({
    event: fc.constantFrom('search_query', 'search_query', 'search_result_click', 'search_success'),
    emitted_at_ms: at,
    query_id: fc.constantFrom('', 'a', 'b', 'c', 'd', 'e', 'f'),
    results_count: fc.constantFrom(0, 0, 1, 4),
    time_to_success_ms: fc.constantFrom(0, 0, 1, 250, 900, 4000),
  })
  const batches = fc.array(fc.array(event, { minLength: 1, maxLength: 25 }), { minLength: 1, maxLength: 4 })
  const { sql } = api.db
  let checked = 0
  await fc.assert(
    fc.asyncProperty(batches, async (batches) => {
      await sql`truncate docs_search_events, docs_search_queries`
      for (const events of batches) {
        const res = await api.request({
          method: 'POST',
          url: '/api/v1/telemetry/docs-search/batch',
          payload: { events },
        })
        if (res.statusCode !== 202) throw new Error(`ingest answered ${res.statusCode}`)
      }
      for (const windowMinutes of [1, 2, 60, 120]) {
        const answer = (await api.get(`/api/v1/telemetry/docs-search/metrics?window_minutes=${windowMinutes}`)).json()
        const [expected] = await sql.unsafe(REFERENCE_KPIS, [NOW - windowMinutes * min, NOW])
        const { zero_result_rate, query_ctr, window_minutes, ...counts } = answer
        t.same(counts, expected, `window ${windowMinutes} min`)
        checked++
      }
    }),
    { seed: SEED, numRuns: 40 },
  )
  t.equal(checked, 160, 'every generated case was compared')
})

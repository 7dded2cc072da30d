// The KPI buckets per hour (migration 0008) and per minute (0012): windows that hold whole hours
// and whole minutes, with edges off the minute, answer as the definitions over the raw events;
// and a rebuild from the events leaves the rollups exactly as the trigger kept them (the
// benchmark's bulk seed relies on it).
import t from 'tap'
import fc from 'fast-check'
import { buildTestApp } from '../helpers/app.js'
import { manualClock } from '../helpers/fixtures.js'
import { REFERENCE_KPIS } from '../helpers/reference-kpis.js'

// Off the minute, so that every window has two partial minutes at its edges.
const NOW = Date.parse('2026-11-22T12:17:31.250Z')
const clock = manualClock(new Date(NOW).toISOString())
const api = await buildTestApp(t, {}, { now: clock.now })
const { sql } = api.db
const min = 60_000
const hour = 60 * min

// Times over the last 7 hours and a little after NOW, clustered at hour starts, window edges,
// the minute starts beside the edges, and NOW; success times over many 250 ms bands, the last
// band (120 s and more) included.
const edges = [0, -min, -hour, -hour - min, -3 * hour, -5 * hour, -6 * hour]
const hourStarts = [0, 1, 2, 3, 4, 5, 6].map((h) => Math.floor(NOW / hour) * hour - h * hour)
const minuteStarts = edges.flatMap((edge) => [0, 1].map((m) => Math.floor((NOW + edge) / min) * min + m * min))
const at = fc.oneof(
  fc.tuple(fc.constantFrom(...edges), fc.integer({ min: -2, max: 2 })).map(([edge, d]) => NOW + edge + d),
  fc.tuple(fc.constantFrom(...hourStarts), fc.integer({ min: -2, max: 2 })).map(([start, d]) => start + d),
  fc.tuple(fc.constantFrom(...minuteStarts), fc.integer({ min: -2, max: 2 })).map(([start, d]) => start + d),
  fc.integer({ min: NOW - 7 * hour, max: NOW + 2 * min }),
)
const event = fc.record({
  event: fc.constantFrom('search_query', 'search_query', 'search_result_click', 'search_success'),
  emitted_at_ms: at,
  query_id: fc.constantFrom('', 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'),
  results_count: fc.constantFrom(0, 0, 1, 4),
  time_to_success_ms: fc.oneof(
    fc.constant(0),
    fc.integer({ min: 1, max: 3000 }),
    fc.constantFrom(249, 250, 251, 119_999, 120_000, 500_000),
  ),
})
const batches = fc.array(fc.array(event, { minLength: 1, maxLength: 30 }), { minLength: 1, maxLength: 5 })

/** One batch after the other, or all at once (concurrent statements over the same query ids and hours). */
const ingest = async (batches: unknown[][], concurrently = false) => {
  await sql`truncate docs_search_events, docs_search_queries`
  const send = async (events: unknown[]) => {
    const res = await api.request({ method: 'POST', url: '/api/v1/telemetry/docs-search/batch', payload: { events } })
    if (res.statusCode !== 202) throw new Error(`ingest answered ${res.statusCode}`)
  }
  if (concurrently) await Promise.all(batches.map(send))
  else for (const events of batches) await send(events)
}

t.test('truncating the query rollup empties its buckets', async (t) => {
  const counts = async () =>
    (
      await sql`select (select count(*) from docs_search_kpi_buckets)::int as hours,
                       (select count(*) from docs_search_kpi_minutes)::int as minutes`
    )[0]
  await ingest([[{ event: 'search_query', emitted_at_ms: NOW - min, query_id: 'x' }]])
  t.same(await counts(), { hours: 1, minutes: 1 })
  await sql`truncate docs_search_events, docs_search_queries`
  t.same(await counts(), { hours: 0, minutes: 0 })
})

t.test('windows with whole hours and partial edges answer as the definitions over the raw events', async (t) => {
  let checked = 0
  await fc.assert(
    fc.asyncProperty(batches, async (batches) => {
      await ingest(batches)
      for (const windowMinutes of [1, 2, 60, 61, 62, 180, 360]) {
        const answer = (await api.get(`/api/v1/telemetry/docs-search/metrics?window_minutes=${windowMinutes}`)).json()
        const [expected] = await sql.unsafe(REFERENCE_KPIS, [NOW - windowMinutes * min, NOW])
        const { zero_result_rate, query_ctr, window_minutes, ...counts } = answer
        t.same(counts, expected, `window ${windowMinutes} min`)
        checked++
      }
    }),
    { seed: Number(process.env.FC_SEED ?? 20261123), numRuns: 40 },
  )
  t.equal(checked, 280, 'every generated case was compared')
})

t.test(
  'a rebuild from the events leaves both rollups as the trigger kept them, batches sent one by one or at once',
  async (t) => {
    const rollups = async () => ({
      queries: await sql`select query_id, first_ms, last_ms, queries, zero_result_queries, has_click, first_success_ms
                       from docs_search_queries order by query_id`,
      // a bucket the trigger emptied (its queries moved to an earlier hour) is the same as none
      buckets:
        await sql`select hour_ms, band, queries, zero_result_queries, clicked, successes from docs_search_kpi_buckets
                       where queries <> 0 or zero_result_queries <> 0 or clicked <> 0 or successes <> 0 order by hour_ms, band`,
      minutes:
        await sql`select minute_ms, band, queries, zero_result_queries, clicked, successes from docs_search_kpi_minutes
                       where queries <> 0 or zero_result_queries <> 0 or clicked <> 0 or successes <> 0 order by minute_ms, band`,
    })
    let checked = 0
    await fc.assert(
      fc.asyncProperty(batches, fc.boolean(), async (batches, concurrently) => {
        await ingest(batches, concurrently)
        const kept = await rollups()
        await sql`select docs_search_rollups_rebuild()`
        t.same(await rollups(), kept)
        checked++
      }),
      { seed: Number(process.env.FC_SEED ?? 20261123), numRuns: 40 },
    )
    t.equal(checked, 40, 'every generated case was compared')
  },
)

t.test(
  'the band of a first success: 250 ms wide, the last from 120 s on, null for none, inlined by the planner',
  async (t) => {
    const [bands] =
      await sql`select docs_search_band(null) as none, docs_search_band(0) as b0, docs_search_band(249) as b249,
                                   docs_search_band(250) as b250, docs_search_band(119999) as b119999,
                                   docs_search_band(120000) as b120000, docs_search_band(2147483647) as bmax`
    t.same(bands, { none: null, b0: 0, b249: 0, b250: 1, b119999: 479, b120000: 480, bmax: 480 })
    // Called as a function (not inlined), it was most of a small window's KPI query time.
    const plan = await sql`explain (verbose) select docs_search_band(x) from (values (1), (null::int)) v(x)`
    const text = plan.map((row) => row['QUERY PLAN']).join('\n')
    t.notMatch(text, /docs_search_band\(/, 'the planner inlines the expression')
    t.match(text, /LEAST/)
  },
)

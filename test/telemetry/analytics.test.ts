// The docs-search analytics over random events: every answer, read from the rollup refreshed
// after part of the events or only after all of them (and for a threshold above 2 sessions from
// the raw events), equals the definitions computed here by brute force over the same raw events
// (normalised query, privacy threshold, click attribution by query id, ranks in buckets), also
// over days archived past the KPI horizon before or after the refresh, and a series summed over
// its points equals the range's totals.
import assert from 'node:assert/strict'
import t from 'tap'
import fc from 'fast-check'
import { createTelemetryRepository } from '../../src/repositories/telemetry.js'
import {
  archiveNames,
  createTelemetryLifecycleRepository,
  partitionName,
} from '../../src/repositories/telemetry-lifecycle.js'
import {
  createTelemetryAnalyticsRepository,
  NORMALISED_QUERY_SQL,
  normaliseQuery,
  SESSIONS_KEPT,
  type AnalyticsRange,
} from '../../src/repositories/telemetry-analytics.js'
import { refreshAnalyticsRollup, SLICES_PER_REFRESH } from '../../src/repositories/telemetry-analytics-rollup.js'
import { AnalyticsRollup, REFRESH_LOCK_ID } from '../../src/telemetry/analytics-rollup.js'
import { createTestDatabase } from '../helpers/database.js'
import { sweepSeed } from '../helpers/sweep-seed.js'

const DAY = 86_400_000
const HOUR = 3_600_000
const START = Date.parse('2026-11-20T00:00:00Z')
// The property's seed: fixed, so every run tries the same fixtures (FC_SEED=<n> or FC_SEED=random for others).
const SEED = sweepSeed('FC_SEED', 20261207)

const { sql } = await createTestDatabase(t)
const telemetry = createTelemetryRepository(sql)
const analytics = createTelemetryAnalyticsRepository(sql)
const lifecycle = createTelemetryLifecycleRepository(sql)

/** No event, no daily partition, no archived day. */
async function empty() {
  for (const name of await archiveNames(sql)) await sql.unsafe(`drop table "${name}"`)
  for (const p of await lifecycle.partitions())
    if (p.name !== 'docs_search_events_default') await sql.unsafe(`drop table "${p.name}"`)
  await sql`truncate docs_search_events, docs_search_queries, docs_search_analytics_dirty, docs_search_analytics_slices, docs_search_analytics_hours, docs_search_analytics_days, docs_search_analytics_rank_days,
    docs_search_analytics_spanning_searches, docs_search_analytics_spanning_clicks, docs_search_analytics_ranks, docs_search_analytics_ids`
}

/** Refreshes the rollup until the log is empty (one refresh takes SLICES_PER_REFRESH slices at most). */
async function refresh() {
  while ((await refreshAnalyticsRollup(sql)).logged >= SLICES_PER_REFRESH);
}

/** Moves one day's events into its own partition and archives it, as retention does past the KPI horizon. */
async function archiveDay(dayMs: number) {
  const name = partitionName(dayMs)
  await lifecycle.createPartition(name, dayMs, dayMs + DAY)
  await lifecycle.archivePartition(name, dayMs)
  await lifecycle.dropArchiveKpiIndexes(`docs_search_archive_${name.slice(-8)}`)
}

interface Event {
  event: string
  emitted_at_ms: number
  session_id: string
  query_id: string
  query_text: string
  results_count: number
  result_rank: number
}

// Texts that differ only by case, spacing or Unicode composition normalise to the same query.
const text = fc.constantFrom(
  'Install',
  ' install ',
  'INSTALL',
  'set  up',
  'set\tup',
  'Café',
  'cafe\u0301',
  'CAFÉ ',
  'x',
  '',
)
const event: fc.Arbitrary<Event> = fc.record({
  event: fc.constantFrom('search_query', 'search_query', 'search_result_click', 'search_success'),
  // three days, clustered at the day starts
  emitted_at_ms: fc.oneof(
    fc.integer({ min: START - HOUR, max: START + 3 * DAY }),
    fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: -2, max: 2 })).map(([d, ms]) => START + d * DAY + ms),
  ),
  session_id: fc.constantFrom('', '', 's1', 's2', 's3'),
  query_id: fc.constantFrom('', 'a', 'b', 'c', 'd', 'e', 'f'),
  query_text: text,
  results_count: fc.constantFrom(0, 0, 3, 12),
  result_rank: fc.constantFrom(0, 1, 2, 10, 11, 20, 21, 500),
})

/** The fields of the fixed example's two events (see the property's examples). */
const CLICK_BEFORE_SEARCH = { session_id: '', query_id: 'c', query_text: 'Install', results_count: 0, result_rank: 0 }

/** The analytics of [fromMs, toMs) straight from their definitions. */
function reference(events: Event[], range: AnalyticsRange, minSessions: number, limit: number) {
  const inRange = events.filter((e) => e.emitted_at_ms >= range.fromMs && e.emitted_at_ms < range.toMs)
  const searches = inRange.filter((e) => e.event === 'search_query')
  const clicks = inRange.filter((e) => e.event === 'search_result_click')
  const clickedIds = new Set(clicks.filter((e) => e.query_id !== '').map((e) => e.query_id))
  const withClick = (e: Event) => e.query_id !== '' && clickedIds.has(e.query_id)
  const byQuery = new Map<string, Event[]>()
  for (const s of searches) {
    const q = normaliseQuery(s.query_text)
    byQuery.set(q, [...(byQuery.get(q) ?? []), s])
  }
  const rows = [...byQuery].map(([query, list]) => {
    const ids = new Set(list.map((s) => s.query_id).filter((id) => id !== ''))
    const ranks = clicks.filter((c) => c.result_rank > 0 && ids.has(c.query_id)).map((c) => c.result_rank)
    const sessions = new Set(list.map((s, i) => s.session_id || `event ${i}`)).size
    const withClickCount = list.filter(withClick).length
    return {
      query,
      sessions,
      count: list.length,
      no_result_count: list.filter((s) => s.results_count === 0).length,
      with_click_count: withClickCount,
      no_click_count: list.filter((s) => s.results_count > 0 && !withClick(s)).length,
      click_through_rate: withClickCount / list.length,
      average_click_position: ranks.length === 0 ? null : ranks.reduce((a, b) => a + b, 0) / ranks.length,
    }
  })
  const listed = rows.filter((r) => r.sessions >= minSessions)
  const top = (key: 'count' | 'no_result_count' | 'no_click_count') =>
    listed
      .filter((r) => r[key] > 0)
      .sort((a, b) => b[key] - a[key] || (a.query < b.query ? -1 : 1))
      .slice(0, limit)
      .map((r) => ({ query: r.query, count: r[key] }))
  const buckets: [number, number | null][] = [
    ...Array.from({ length: 10 }, (_, i) => [i + 1, i + 1] as [number, number]),
    [11, 20],
    [21, null],
  ]
  return {
    searches: listed
      .sort((a, b) => b.count - a.count || (a.query < b.query ? -1 : 1))
      .slice(0, limit)
      .map(({ sessions: _s, no_click_count: _n, ...row }) => row),
    noResults: top('no_result_count'),
    noClicks: top('no_click_count'),
    positions: buckets.map(([from, to]) => ({
      from_rank: from,
      to_rank: to,
      clicks: clicks.filter((c) => c.result_rank >= from && (to === null || c.result_rank <= to)).length,
    })),
    totals: {
      total_queries: searches.length,
      zero_result_queries: searches.filter((s) => s.results_count === 0).length,
      queries_with_click: searches.filter(withClick).length,
    },
  }
}

const round = <T extends { average_click_position: number | null }>(rows: T[]) =>
  rows.map((r) => ({
    ...r,
    average_click_position: r.average_click_position === null ? null : Number(r.average_click_position.toFixed(9)),
  }))

t.test('every analytics answer equals the brute-force definitions over the raw events', async (t) => {
  // node's assert inside the property, so that fast-check sees a failure and shrinks it
  await fc.assert(
    fc.asyncProperty(
      fc.array(event, { minLength: 0, maxLength: 120 }),
      fc.integer({ min: 0, max: 2 }),
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 8 }),
      fc.option(fc.integer({ min: 0, max: 2 })),
      fc.nat(),
      fc.boolean(),
      async (events, firstDay, days, minSessions, limit, archived, split, refreshBetween) => {
        await empty()
        // Two batches, the rollup refreshed after the first or not, then after the second; the
        // day archived before or after that last refresh.
        const cut = events.length === 0 ? 0 : split % (events.length + 1)
        if (cut > 0) await telemetry.append(events.slice(0, cut))
        if (refreshBetween) await refresh()
        if (cut < events.length) await telemetry.append(events.slice(cut))
        if (archived !== null && refreshBetween) await archiveDay(START + archived * DAY)
        await refresh()
        if (archived !== null && !refreshBetween) await archiveDay(START + archived * DAY)
        const range = { fromMs: START + firstDay * DAY, toMs: START + (firstDay + days) * DAY }
        const want = reference(events, range, minSessions, limit)
        assert.deepEqual(round(await analytics.searches(range, minSessions, limit)), round(want.searches), 'searches')
        assert.deepEqual(await analytics.noResults(range, minSessions, limit), want.noResults, 'no results')
        assert.deepEqual(await analytics.noClicks(range, minSessions, limit), want.noClicks, 'no clicks')
        assert.deepEqual(await analytics.clickPositions(range), want.positions, 'click positions')
        for (const periodMs of [DAY, HOUR]) {
          const points = await analytics.series(range, periodMs)
          assert.equal(points.length, (range.toMs - range.fromMs) / periodMs, 'one point per period')
          const sum = (key: 'total_queries' | 'zero_result_queries' | 'queries_with_click') =>
            points.reduce((n, p) => n + p[key], 0)
          assert.deepEqual(
            {
              total_queries: sum('total_queries'),
              zero_result_queries: sum('zero_result_queries'),
              queries_with_click: sum('queries_with_click'),
            },
            want.totals,
            'the series sums to the range totals',
          )
          for (const p of points) {
            if (p.total_queries === 0)
              assert.deepEqual([p.query_ctr, p.zero_result_rate], [null, null], 'no searches: null rates')
          }
        }
      },
    ),
    {
      numRuns: 60,
      seed: SEED,
      // Always also: a click before its search (same query id), which a per-hour rollup once missed:
      // two days before, an hour before, and in the same 5-minute slice. In one batch, and in two
      // (the search first, the click after; or the click first), with a refresh between or not;
      // for the two-day case, neither day archived, the click's or the search's.
      examples: [
        ...[null, 0, 2].map((archived) => [START + 2 * DAY, START, archived] as const),
        [START + 2 * HOUR, START + HOUR, null] as const,
        [START + HOUR + 60_000, START + HOUR, null] as const,
      ].flatMap(([searchAt, clickAt, archived]) =>
        [false, true].flatMap((clickFirst) =>
          [0, 1].flatMap((split) =>
            [false, true].map(
              (refreshBetween): [Event[], number, number, number, number, number | null, number, boolean] => {
                const search = {
                  ...CLICK_BEFORE_SEARCH,
                  event: 'search_query',
                  results_count: 3,
                  emitted_at_ms: searchAt,
                }
                const click = { ...CLICK_BEFORE_SEARCH, event: 'search_result_click', emitted_at_ms: clickAt }
                return [clickFirst ? [click, search] : [search, click], 0, 3, 1, 1, archived, split, refreshBetween]
              },
            ),
          ),
        ),
      ),
    },
  )
  t.pass(`60 random fixtures (seed ${SEED}) and the fixed examples agree`)
})

t.test('a query asked by one session is counted but never listed', async (t) => {
  await empty()
  const at = START + HOUR
  await telemetry.append([
    { event: 'search_query', emitted_at_ms: at, session_id: 'v1', query_text: 'jane@example.com', results_count: 0 },
    { event: 'search_query', emitted_at_ms: at, session_id: 'v1', query_text: 'jane@example.com', results_count: 0 },
    { event: 'search_query', emitted_at_ms: at, session_id: 'v1', query_text: 'Install', results_count: 0 },
    { event: 'search_query', emitted_at_ms: at, session_id: '', query_text: ' install', results_count: 0 },
  ])
  const range = { fromMs: START, toMs: START + DAY }
  await refresh()
  t.same(await analytics.noResults(range, 2, 10), [{ query: 'install', count: 2 }])
  const [day] = await analytics.series(range, DAY)
  t.equal(day!.zero_result_queries, 4, 'the totals still count it')
})

t.test('thresholds past the session ids a row keeps: merged over hours and days, then the raw events', async (t) => {
  await empty()
  const session = (i: number) => `s${String(i).padStart(2, '0')}`
  const asked = (query_text: string, sessions: number[], at: (i: number) => number, results_count = 1) =>
    sessions.map((i) => ({
      event: 'search_query',
      emitted_at_ms: at(i),
      session_id: session(i),
      query_text,
      results_count,
    }))
  const range = { fromMs: START, toMs: START + 3 * DAY }
  const many = Array.from({ length: SESSIONS_KEPT + 2 }, (_, i) => i)
  await telemetry.append([
    // more sessions than a row keeps, half in one hour, half in another, the same ones on the next day
    ...asked('install', many, (i) => START + (i % 2) * HOUR),
    ...asked('install', many, (i) => START + DAY + (i % 2) * HOUR),
    // one session fewer than the rows keep, over three days, and one search without a session
    ...asked('sso', many.slice(0, SESSIONS_KEPT - 1), (i) => START + (i % 3) * DAY),
    { event: 'search_query', emitted_at_ms: START + 2 * DAY, session_id: '', query_text: 'sso', results_count: 1 },
    // found nothing, in as many sessions as 'install'
    ...asked('pricing', many, (i) => START + (i % 2) * HOUR, 0),
  ])
  await refresh()
  const listed = async (minSessions: number) => (await analytics.searches(range, minSessions, 10)).map((r) => r.query)
  t.same(
    await listed(SESSIONS_KEPT),
    ['install', 'pricing', 'sso'],
    'from the rollup: the capped rows still reach the threshold',
  )
  t.same(await listed(SESSIONS_KEPT + 1), ['install', 'pricing'], 'from the raw events')
  t.same(await listed(SESSIONS_KEPT + 2), ['install', 'pricing'])
  t.same(await listed(SESSIONS_KEPT + 3), [])
  // The other two lists from the raw events: a query asked by exactly the threshold's sessions is listed.
  const exactly = SESSIONS_KEPT + 2
  t.same(await analytics.noResults(range, exactly, 10), [{ query: 'pricing', count: many.length }], 'no results')
  t.same(await analytics.noResults(range, exactly + 1, 10), [])
  t.same(await analytics.noClicks(range, exactly, 10), [{ query: 'install', count: 2 * many.length }], 'no clicks')
  t.same(await analytics.noClicks(range, exactly + 1, 10), [])
})

t.test('an erased session leaves a row that kept as many session ids as it could', async (t) => {
  await empty()
  // SESSIONS_KEPT + 1 sessions in one slice: the row keeps the least SESSIONS_KEPT ids
  const sessions = Array.from({ length: SESSIONS_KEPT + 1 }, (_, i) => `s${String(i).padStart(2, '0')}`)
  await telemetry.append(
    sessions.map((session_id) => ({
      event: 'search_query',
      emitted_at_ms: START + HOUR,
      session_id,
      query_text: 'install',
      results_count: 1,
    })),
  )
  await refresh()
  const range = { fromMs: START, toMs: START + DAY }
  const listed = async () => (await analytics.searches(range, SESSIONS_KEPT, 10)).map((r) => [r.query, r.count])
  t.same(await listed(), [['install', SESSIONS_KEPT + 1]])
  // one of the kept ids erased: the session past them still counts
  await sql.begin((tx) => createTelemetryRepository(tx).eraseSession('s00'))
  await refresh()
  t.same(await listed(), [['install', SESSIONS_KEPT]], 'still listed: the other sessions reach the threshold')
  await sql.begin((tx) => createTelemetryRepository(tx).eraseSession('s01'))
  await refresh()
  t.same(await listed(), [], 'one session fewer than the threshold')
})

t.test('one replica refreshes at a time: the others skip while it holds the lock', async (t) => {
  await empty()
  await telemetry.append([
    { event: 'search_query', emitted_at_ms: START + HOUR, session_id: '', query_text: 'install', results_count: 0 },
  ])
  const replica = new AnalyticsRollup({ sql } as never)
  const holder = await sql.reserve()
  t.teardown(() => holder.release())
  await holder`select pg_advisory_lock(${REFRESH_LOCK_ID})`
  t.equal(await replica.refresh(), false, 'skipped')
  const [logged] = await sql<{ n: number }[]>`select count(*)::int as n from docs_search_analytics_dirty`
  t.equal(logged!.n, 1, 'the log kept for the replica that holds the lock')
  await holder`select pg_advisory_unlock(${REFRESH_LOCK_ID})`
  t.equal(await replica.refresh(), true, 'refreshed once the lock is free')
  const [day] = await analytics.series({ fromMs: START, toMs: START + DAY }, DAY)
  t.equal(day!.total_queries, 1)
})

t.test('a refresh with its budget spent leaves the oldest slices logged; an erasure goes first', async (t) => {
  await empty()
  // Two batches of slices more than one refresh takes, one search each, 5 minutes apart.
  const slices = 2 * SLICES_PER_REFRESH + 1
  const at = (i: number) => START + i * 300_000
  await telemetry.append(
    Array.from({ length: slices }, (_, i) => ({
      event: 'search_query',
      emitted_at_ms: at(i),
      session_id: `s${i}`,
      query_text: 'install',
      results_count: 1,
    })),
  )
  const rollup = new AnalyticsRollup({ sql } as never, 0)
  const totals = async () => {
    const rows = await sql<{ slice_ms: string }[]>`select slice_ms from docs_search_analytics_slices order by 1`
    return rows.map((r) => Number(r.slice_ms))
  }
  t.equal(await rollup.refresh(), true)
  t.same(
    await totals(),
    Array.from({ length: SLICES_PER_REFRESH }, (_, i) => at(slices - SLICES_PER_REFRESH + i)),
    'one batch, the newest slices',
  )
  t.equal(rollup.figures.backlogSlices, slices - SLICES_PER_REFRESH, 'the rest left logged')
  t.equal(rollup.figures.lastRefreshStartMs, null, 'not fresh: slices are still logged')

  // An erasure of the oldest slice's session is taken before the newer slices left.
  await sql.begin((tx) => createTelemetryRepository(tx).eraseSession('s0'))
  await telemetry.append([
    { event: 'search_query', emitted_at_ms: at(slices), session_id: 'late', query_text: 'install', results_count: 1 },
  ])
  await rollup.refresh()
  const [erased] = await sql<{ n: number }[]>`
    select count(*)::int as n from docs_search_analytics_dirty where slice_ms = ${at(0)}`
  t.equal(erased!.n, 0, 'the erased slice recomputed')
  t.ok((await totals()).includes(at(slices)), 'and the newest slice')
  t.equal(rollup.figures.backlogSlices, slices + 1 - 2 * SLICES_PER_REFRESH, 'the slices between still wait')

  const unbounded = new AnalyticsRollup({ sql } as never)
  await unbounded.refresh()
  t.equal(unbounded.figures.backlogSlices, 0)
  t.type(unbounded.figures.lastRefreshStartMs, 'number', 'fresh once the log is empty')
  const [day] = await analytics.series({ fromMs: START, toMs: START + DAY }, DAY)
  t.equal(day!.total_queries, slices, 'every search counted but the erased one, and the late one')
})

t.test('the normalisation: trim, lower case, collapsed whitespace, NFC', async (t) => {
  t.equal(normaliseQuery('  Set \t\n UP '), 'set up')
  t.equal(normaliseQuery('CAFE\u0301'), 'caf\u00e9')
  const [row] =
    await sql`select ${sql.unsafe(NORMALISED_QUERY_SQL)} as n from (select ${'  CAFE\u0301 \t Au  Lait '}::text as query_text) x`
  t.equal(row!.n, normaliseQuery('  CAFE\u0301 \t Au  Lait '))
})

// Migration 0016 (the analytics rollup) under ingest: the events stored before it and the batches
// sent while it runs are all logged for the refresh, so that the refreshed rollup answers as one
// rebuilt from scratch over every event.
import t from 'tap'
import { createClient } from '../../src/db/client.js'
import { migrate } from '../../src/db/migrate.js'
import { refreshAnalyticsRollup } from '../../src/repositories/telemetry-analytics-rollup.js'
import { createTelemetryAnalyticsRepository } from '../../src/repositories/telemetry-analytics.js'
import { createTelemetryRepository } from '../../src/repositories/telemetry.js'
import { createPartlyMigratedDatabase } from '../helpers/database.js'
import { waitFor } from '../helpers/wait.js'

const HOUR = 3_600_000
const DAY = 86_400_000
const today = Math.floor(Date.now() / DAY) * DAY

t.test('every event stored before or during the migration reaches the refreshed rollup', async (t) => {
  const db = await createPartlyMigratedDatabase(t, (f) => f < '0016')
  // Ingest on its own pool, as a replica of the previous release would.
  const pool = createClient(db.url, { max: 3 })
  t.teardown(() => pool.end())
  const telemetry = createTelemetryRepository(pool)
  const batch = (n: number, tag: string) =>
    Array.from({ length: n }, (_, i) => ({
      event: i % 3 === 0 ? 'search_result_click' : 'search_query',
      emitted_at_ms: today - ((i * 7_919_000) % (2 * DAY)) + HOUR,
      query_id: i % 7 === 0 ? '' : `q${i % 60}`,
      session_id: `${tag}-s${i % 4}`,
      query_text: `topic ${i % 5}`,
      results_count: i % 3,
      result_rank: i % 4,
    }))
  await telemetry.append(batch(500, 'before'))

  let running = true
  let rounds = 0
  const traffic = Array.from({ length: 2 }, async (_, w) => {
    while (running) await telemetry.append(batch(40, `during-${w}-${rounds++}`))
  })
  await waitFor('batches before the migration', () => rounds > 2)
  t.same((await migrate(db.sql)).slice(0, 1), ['0016_docs_search_analytics_rollup.sql'])
  const roundsAtMigration = rounds
  await waitFor('batches after the migration', () => rounds > roundsAtMigration + 2)
  running = false
  await Promise.all(traffic)

  const analytics = createTelemetryAnalyticsRepository(db.sql)
  const range = { fromMs: today - 2 * DAY, toMs: today + DAY }
  const answers = async () => {
    while ((await refreshAnalyticsRollup(db.sql)).logged > 0);
    return {
      searches: await analytics.searches(range, 2, 100),
      noClicks: await analytics.noClicks(range, 2, 100),
      positions: await analytics.clickPositions(range),
      series: await analytics.series(range, HOUR),
    }
  }
  const refreshed = await answers()
  t.ok(refreshed.searches.length > 0)
  await db.sql`truncate docs_search_analytics_slices, docs_search_analytics_hours, docs_search_analytics_days, docs_search_analytics_ranks, docs_search_analytics_rank_days, docs_search_analytics_ids,
    docs_search_analytics_spanning_searches, docs_search_analytics_spanning_clicks`
  await db.sql`insert into docs_search_analytics_dirty (slice_ms) select distinct (emitted_at_ms / 300000) * 300000 from docs_search_events`
  t.same(refreshed, await answers(), 'as rebuilt from every event')
})

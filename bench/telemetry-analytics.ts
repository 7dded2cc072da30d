// The docs-search analytics part of `make bench-telemetry`: how fresh the rollup stays while the
// seed runs at full speed (the server refreshes it every minute), one refresh's time, and the
// five operations' latency over 7 and 30 days.
import type postgres from 'postgres'
import { DAY_MS } from '../src/repositories/telemetry-lifecycle.js'

const fmt = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 1 })
const p = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN

/** A gauge's value from the Prometheus text of /metrics. */
const gauge = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN)

/**
 * Polls the server's /metrics every 5 s until stopped: the age of the rollup's data (now minus the
 * start of the last completed refresh) and each refresh's duration.
 */
export function watchFreshness(base: string) {
  const ages: number[] = []
  const backlogs: number[] = []
  const durations = new Map<number, number>()
  let stopped = false
  const done = (async () => {
    while (!stopped) {
      await new Promise((resolve) => setTimeout(resolve, 5000))
      const text = await fetch(`${base}/metrics`).then(
        (r) => r.text(),
        () => '',
      )
      const started = gauge(text, 'docs_search_analytics_refreshed_timestamp_seconds')
      backlogs.push(gauge(text, 'docs_search_analytics_refresh_backlog_slices'))
      if (started > 0) {
        ages.push(Date.now() / 1000 - started)
        durations.set(started, gauge(text, 'docs_search_analytics_refresh_duration_seconds'))
      }
    }
  })()
  return async () => {
    stopped = true
    await done
    const sortedAges = [...ages].sort((a, b) => a - b)
    const sortedDurations = [...durations.values()].sort((a, b) => a - b)
    const sortedBacklogs = [...backlogs].sort((a, b) => a - b)
    return (
      `analytics rollup while seeding: data age (now − start of the last refresh that emptied the log) p50 ${fmt(p(sortedAges, 0.5))} s, max ${fmt(sortedAges.at(-1) ?? Number.NaN)} s (target ≤ 300 s); ` +
      `${sortedDurations.length} such refreshes, each p50 ${fmt(p(sortedDurations, 0.5))} s, max ${fmt(sortedDurations.at(-1) ?? Number.NaN)} s; ` +
      `slices left logged by a refresh whose budget ran out p50 ${fmt(p(sortedBacklogs, 0.5))}, max ${fmt(sortedBacklogs.at(-1) ?? Number.NaN)}`
    )
  }
}

const ROLLUP_TABLES = [
  'docs_search_analytics_slices',
  'docs_search_analytics_hours',
  'docs_search_analytics_days',
  'docs_search_analytics_spanning_searches',
  'docs_search_analytics_spanning_clicks',
  'docs_search_analytics_ranks',
  'docs_search_analytics_rank_days',
]

/**
 * When the seed covers fewer than `days` days before today: the rollup rows of the days before it
 * are copied from its whole days (query ids renamed per copy), so that a range of `days` days
 * reads as many rows as it would have at the seed's density. The analytics read the rollup alone.
 */
export async function copyRollupDays(
  bulk: postgres.Sql,
  seedStartMs: number,
  todayMs: number,
  days: number,
): Promise<number> {
  const firstWhole = Math.ceil(seedStartMs / DAY_MS) * DAY_MS
  const wholeDays = (todayMs - firstWhole) / DAY_MS
  let copied = 0
  // The seed's first, partial day keeps its own rows.
  for (let day = todayMs - (days - 1) * DAY_MS, i = 0; day < firstWhole - DAY_MS; day += DAY_MS, i++) {
    const shift = day - (firstWhole + (i % wholeDays) * DAY_MS)
    const from = day - shift
    for (const table of ROLLUP_TABLES) {
      const columns = (
        await bulk<{ name: string }[]>`
          select attname as name from pg_attribute where attrelid = ${table}::regclass and attnum > 0 and not attisdropped order by attnum`
      ).map((c) => c.name)
      const select = columns.map((c) =>
        c === 'slice_ms' || c === 'hour_ms' || c === 'day_ms'
          ? `${c} + ${shift}`
          : c === 'query_id'
            ? `query_id || '#${day}'`
            : c,
      )
      const rows = await bulk.unsafe(
        `insert into ${table} (${columns.join(', ')}) select ${select.join(', ')} from ${table} where ${columns[0]} >= ${from} and ${columns[0]} < ${from + DAY_MS}`,
      )
      copied += rows.count
    }
  }
  await bulk.unsafe(`analyze ${ROLLUP_TABLES.join(', ')}`)
  return copied
}

const OPERATIONS = [
  ['searches', 'searches'],
  ['no-results', 'searches/no-results'],
  ['no-clicks', 'searches/no-clicks'],
  ['click positions', 'clicks/positions'],
  ['series per day', 'series?granularity=day'],
  ['series per hour', 'series?granularity=hour'],
] as const

/** Each operation over the last 7 and 30 days (today included): 30 calls, the first 10 apart. */
export async function measureAnalytics(base: string, key: string, todayMs: number): Promise<string[]> {
  const day = (ms: number) => new Date(ms).toISOString().slice(0, 10)
  const lines: string[] = []
  for (const days of [7, 30]) {
    const range = `from=${day(todayMs - (days - 1) * DAY_MS)}&to=${day(todayMs)}`
    const parts: string[] = []
    let worst = 0
    for (const [label, path] of OPERATIONS) {
      if (days > 7 && path.endsWith('hour')) continue
      const timings: number[] = []
      for (let i = 0; i < 30; i++) {
        const started = performance.now()
        const r = await fetch(
          `${base}/api/v1/telemetry/docs-search/analytics/${path}${path.includes('?') ? '&' : '?'}${range}`,
          {
            headers: { 'x-api-key': key },
          },
        )
        if (r.status !== 200) throw new Error(`analytics ${path} answered ${r.status}`)
        await r.arrayBuffer()
        timings.push(performance.now() - started)
      }
      const warm = timings.slice(10).sort((a, b) => a - b)
      worst = Math.max(worst, p(warm, 0.95))
      parts.push(`${label} ${fmt(p(warm, 0.5))}/${fmt(p(warm, 0.95))}`)
    }
    lines.push(
      `analytics over ${days} days, ms p50/p95 of 20 calls after 10: ${parts.join(', ')}; worst p95 ${fmt(worst)} ms (target ≤ ${days === 7 ? 100 : 300} ms)`,
    )
  }
  return lines
}

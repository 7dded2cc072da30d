// Telemetry at scale (`make bench-telemetry`): N docs-search events (default 100M: 25M searches
// of 4 events over the 7 days before now) sent through the public batch API to the real server
// (a child process), then: sustained ingest (events/s, per-batch p99), disk bytes per event
// (raw partitions, rollups), the KPI medians for 1 h / 1 day / 7 days, the time to archive one
// day at the KPI horizon and to drop it at retention age (one day as the seed left it, one out of
// the page cache) with the ingest p99 during each step against without, and the time to erase one
// session of 1,000 events; the analytics: the rollup's freshness during the seed, one refresh,
// and the five operations over 7 and 30 days (bench/telemetry-analytics.ts). The database is dropped at the end (100M events: tens of GB).
// BENCH_EVENTS scales it down (e.g. BENCH_EVENTS=2000000), BENCH_CONCURRENCY sets the clients.
// BENCH_DAYS (default 7, at least 3: the drops take the first two whole days before today) spreads
// the events over fewer days: BENCH_DAYS=3 BENCH_EVENTS=42900000 has the 100M week's density per
// hour (what the 60-minute KPI reads) in under half the seed. BENCH_KEEP=1 keeps the database
// (its name is printed) to look at plans afterwards; drop it by hand.
import { execFileSync, spawn } from 'node:child_process'
import { statSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { createClient } from '../src/db/client.js'
import { migrate } from '../src/db/migrate.js'
import { projectRoot } from '../src/paths.js'
import {
  archiveName,
  createTelemetryLifecycleRepository,
  DAY_MS,
  isLockTimeout,
  partitionName,
} from '../src/repositories/telemetry-lifecycle.js'
import { ADMIN_URL, databaseUrl } from '../test/helpers/database.js'
import { freePort } from '../test/helpers/server-process.js'
import { evict, relationFiles, residentBytes } from './page-cache.js'
import { METRICS_TARGETS_MS } from './telemetry-seed.js'
import { recordPrinted } from './results-file.js'
import { copyRollupDays, measureAnalytics, watchFreshness } from './telemetry-analytics.js'
import { AnalyticsRollup } from '../src/telemetry/analytics-rollup.js'
import { SLICE_MS } from '../src/repositories/telemetry-analytics-rollup.js'

const EVENTS = Number(process.env.BENCH_EVENTS ?? 100_000_000)
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8)
const BATCH = 500
const SEARCHES = Math.floor(EVENTS / 4)
const NOW = Date.now()
const DAYS = Number(process.env.BENCH_DAYS ?? 7)
if (!(DAYS >= 3)) throw new Error('BENCH_DAYS must be at least 3: the drops take two whole days before today')
const SPAN_MS = DAYS * DAY_MS
const KEY = 'bench'
const ERASED_SESSION = 'bench-erase-me'

const p = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? Number.NaN
const fmt = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 1 })

/** When event n of the sequence happened: its search's start plus 7 s per step within the search. */
const eventAt = (n: number) =>
  NOW - SPAN_MS + Math.floor((Math.floor(n / 4) * SPAN_MS) / SEARCHES) + (n % 4) * 7000 - 21000

/**
 * The events of batch `b`, in time order across batches: search s has a search_query, two
 * clicks (views for every fourth search) and a search_success 7 s apart; sessions of 5 searches.
 */
function batchBody(b: number): string {
  const events: string[] = []
  for (let i = 0; i < BATCH; i++) {
    const n = b * BATCH + i
    const s = Math.floor(n / 4)
    const k = n % 4
    const at = eventAt(n)
    const event =
      k === 0 ? 'search_query' : k === 3 ? 'search_success' : s % 4 === 1 ? 'search_result_view' : 'search_result_click'
    const success =
      k === 3 && s % 2 === 0 ? 300 + ((s * 7919) % 20000) : k === 1 && s % 3 === 0 ? 200 + ((s * 104729) % 30000) : 0
    events.push(
      `{"event":"${event}","emitted_at_ms":${at},"session_id":"s-${Math.floor(s / 5)}","query_id":"q-${s}","query_text":"rate limit headers ${s % 97}",` +
        `"page_path":"/docs/p${s % 50}","results_count":${k === 0 ? s % 5 : 0},"result_rank":${k === 1 || k === 2 ? k : 0},"time_to_success_ms":${success}}`,
    )
  }
  return `{"events":[${events.join(',')}]}`
}

const name = `bench_telemetry_${randomBytes(3).toString('hex')}`
const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
await admin.unsafe(`create database "${name}"`)
const url = databaseUrl(name)
const sql = createClient(url, { max: 4 })
const bulk = postgres(url, { max: 1, onnotice: () => {} }) // no statement_timeout
let child: ReturnType<typeof spawn> | undefined
let ddl: Awaited<ReturnType<typeof sql.reserve>> | undefined
// Stopped early (Ctrl-C, or a disk filling up): the server and the tens of GB go too.
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => {
    child?.kill('SIGTERM')
    console.log(`${signal}: dropping ${name}`)
    void admin.unsafe(`drop database if exists "${name}" with (force)`).finally(() => process.exit(130))
  })
const printed = recordPrinted(
  'telemetry',
  `Telemetry at ${EVENTS.toLocaleString('en')} events over ${DAYS} days (make bench-telemetry)`,
  `BENCH_EVENTS=${EVENTS} BENCH_DAYS=${DAYS} BENCH_CONCURRENCY=${CONCURRENCY} make bench-telemetry`,
)
let completed = false
try {
  await migrate(sql)
  // The partitions a service running all week would have made (it makes yesterday's to two days ahead).
  ddl = await sql.reserve()
  const lifecycle = createTelemetryLifecycleRepository(ddl as never)
  for (let day = Math.floor((NOW - SPAN_MS) / DAY_MS) * DAY_MS - DAY_MS; day <= NOW + 2 * DAY_MS; day += DAY_MS) {
    if (!(await lifecycle.partitions()).some((x) => x.name === partitionName(day)))
      await lifecycle.createPartition(partitionName(day), day, day + DAY_MS)
  }

  const port = await freePort()
  child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    cwd: projectRoot,
    env: {
      ...process.env,
      DATABASE_URL: url,
      API_KEYS: KEY,
      LOG_LEVEL: 'warn',
      RATE_LIMIT_MAX: '10000000',
      LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0',
      PORT: String(port),
      HOST: '127.0.0.1',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  })
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    if (i > 600) throw new Error('server did not start')
    if (
      await fetch(`${base}/live`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break
    await sleep(100)
  }
  const headers = { 'content-type': 'application/json', 'x-api-key': KEY }
  const post = async (body: string) => {
    const started = performance.now()
    const r = await fetch(`${base}/api/v1/telemetry/docs-search/batch`, { method: 'POST', body, headers })
    await r.arrayBuffer()
    if (r.status !== 202) throw new Error(`ingest answered ${r.status}`)
    return { started, ms: performance.now() - started }
  }

  // 1. The seed, through the API: sustained ingest, while the server refreshes the analytics rollup.
  const freshness = watchFreshness(base)
  const batches = Math.ceil(EVENTS / BATCH)
  const latencies: number[] = []
  let next = 0
  const seedStart = performance.now()
  let lastReport = seedStart
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < batches) {
        const b = next++
        latencies.push((await post(batchBody(b))).ms)
        if (performance.now() - lastReport > 60_000) {
          lastReport = performance.now()
          console.log(
            `  … ${fmt((next * BATCH) / 1e6)}M events, ${fmt((next * BATCH) / ((lastReport - seedStart) / 1000))} events/s`,
          )
        }
      }
    }),
  )
  const seedSeconds = (performance.now() - seedStart) / 1000
  const freshnessLine = await freshness()
  latencies.sort((a, b) => a - b)
  console.log(
    `scale: ${fmt(batches * BATCH)} events (${fmt(SEARCHES)} searches of 4 events over ${DAYS} days), ${CONCURRENCY} clients, batches of ${BATCH}`,
  )
  console.log(
    `ingest through the batch API: ${fmt((batches * BATCH) / seedSeconds)} events/s sustained (${fmt(seedSeconds)} s); per batch p50 ${fmt(p(latencies, 0.5))} ms, p99 ${fmt(p(latencies, 0.99))} ms (target ≥ 50,000 events/s)`,
  )
  // The seeded week ended when the seed began, minutes or hours ago: the same sequence goes on at
  // the same density up to the clock, so that every KPI window ends on fresh events (a 1-hour
  // window would otherwise hold none).
  let topUp = batches
  while (eventAt(topUp * BATCH) < Date.now()) await post(batchBody(topUp++))
  console.log(`topped up to the clock: ${fmt((topUp - batches) * BATCH)} events since the seed began`)
  // The seed sends the days' events many times faster than they happen: the rollup's age during it
  // is a stress at that pace, not the steady state (there the refresh takes the current slice:
  // the one-slice refresh below).
  const pace = (batches * BATCH) / seedSeconds / (EVENTS / (DAYS * 86_400))
  console.log(`${freshnessLine}; the seed ran ${fmt(pace)} times faster than its events' own pace`)
  await bulk`vacuum analyze docs_search_events, docs_search_queries, docs_search_kpi_buckets, docs_search_kpi_minutes`

  // 2. Disk per event.
  const [disk] = await bulk<{ raw: string; rollup: string; buckets: string; n: string }[]>`
    select (select sum(pg_total_relation_size(relid)) from pg_partition_tree('docs_search_events') where isleaf) as raw,
           pg_total_relation_size('docs_search_queries') as rollup, pg_total_relation_size('docs_search_kpi_buckets') + pg_total_relation_size('docs_search_kpi_minutes') as buckets,
           (select count(*) from docs_search_events) as n`
  const stored = Number(disk!.n)
  console.log(
    `disk per event (table + indexes): raw ${fmt(Number(disk!.raw) / stored)} B, rollups ${fmt((Number(disk!.rollup) + Number(disk!.buckets)) / stored)} B ` +
      `(raw ${fmt(Number(disk!.raw) / 1e9)} GB, query rollup ${fmt(Number(disk!.rollup) / 1e6)} MB, KPI buckets ${fmt(Number(disk!.buckets) / 1e6)} MB; ${fmt(stored)} events)`,
  )

  // 3. KPI medians. The first call on each of the server's pool connections (10) loads the
  // partitions' catalogue entries into that backend: reported apart, as the cold calls.
  for (const window of [60, 1440, 10080]) {
    const timings: number[] = []
    for (let i = 0; i < 20; i++) {
      const t0 = performance.now()
      const r = await fetch(`${base}/api/v1/telemetry/docs-search/metrics?window_minutes=${window}`, {
        headers: { 'x-api-key': KEY },
      })
      if (r.status !== 200) throw new Error(`metrics answered ${r.status}`)
      await r.json()
      timings.push(performance.now() - t0)
    }
    const cold = timings.slice(0, 10).sort((a, b) => a - b)
    const warm = timings.slice(10).sort((a, b) => a - b)
    console.log(
      `KPI window ${window} min: median ${fmt(p(warm, 0.5))} ms (target ≤ ${METRICS_TARGETS_MS[window]} ms); the first 10 calls: median ${fmt(p(cold, 0.5))} ms, max ${fmt(cold.at(-1)!)} ms`,
    )
  }

  // 3b. The analytics: one refresh of what the top-up logged (the server's own may be under way:
  // the lock is waited for), then the operations over 7 and 30 days.
  const rollup = new AnalyticsRollup({ sql } as never)
  const refreshStarted = performance.now()
  while (!(await rollup.refresh())) await sleep(100)
  console.log(
    `analytics rollup caught up after the top-up (the server's refresh under way, then this one, ${rollup.figures.slicesRecomputed} slices recomputed by it): ${fmt(performance.now() - refreshStarted)} ms`,
  )
  // The last whole 5-minute slice at the seed's density, as the refresh recomputes the current
  // slice every minute (with the slices sharing a query id with it).
  const lastSlice = Math.floor(Date.now() / SLICE_MS) * SLICE_MS - SLICE_MS
  const [{ n: sliceEvents } = { n: '0' }] = await bulk<{ n: string }[]>`
    select count(*) as n from docs_search_events where emitted_at_ms >= ${lastSlice} and emitted_at_ms < ${lastSlice + SLICE_MS}`
  await bulk`insert into docs_search_analytics_dirty (slice_ms) values (${lastSlice})`
  const [before, linkedBefore] = [rollup.figures.slicesRecomputed, rollup.figures.slicesLinked]
  const sliceStarted = performance.now()
  while (!(await rollup.refresh())) await sleep(100)
  console.log(
    `analytics rollup refresh of one 5-minute slice (${fmt(Number(sliceEvents))} events; ${rollup.figures.slicesRecomputed - before} slices recomputed whole, the share of its query ids in ${rollup.figures.slicesLinked - linkedBefore} other slices): ${fmt(performance.now() - sliceStarted)} ms`,
  )
  const todayMs = Math.floor(NOW / DAY_MS) * DAY_MS
  const copied = await copyRollupDays(bulk, NOW - SPAN_MS, todayMs, 30)
  if (copied > 0)
    console.log(
      `analytics rollup: ${fmt(copied)} rows of the seeded whole days copied to the days before the seed, up to 30 days (the analytics read the rollup alone)`,
    )
  for (const line of await measureAnalytics(base, KEY, todayMs)) console.log(line)

  // 4. Ingest p99 without and during the archiving and the drop of a day: the clients at full speed,
  // with batches dated now (the current partition), as the service takes them while retention runs.
  let b0 = 0
  const load = async (seconds: number, during?: () => Promise<void>) => {
    const samples: { started: number; ms: number }[] = []
    const until = performance.now() + seconds * 1000
    const clients = Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < until)
        samples.push(await post(batchBody(batches - 1 - (b0++ % Math.min(200, batches)))))
    })
    const extra = during ? sleep(seconds * 400).then(during) : Promise.resolve()
    await Promise.all([...clients, extra])
    return samples
  }
  const baseline = (await load(6)).map((s) => s.ms).sort((a, b) => a - b)
  console.log(`ingest p99 without a drop ${fmt(p(baseline, 0.99))} ms`)

  // Two whole days of the seeded week go (the day before them holds only its last hours), each
  // in the service's two steps. At the KPI horizon (7 days) the day leaves the table and its KPI
  // indexes go (archivePartition, dropArchiveKpiIndexes); at retention age (30 days by default)
  // the rest is counted and dropped. The first day is dropped as the seed left it, in the OS page
  // cache as much as memory allowed; the second as it lies at retention age, weeks after it was
  // written and never read since: out of the page cache, where later data has pushed it on any
  // host whose memory holds less than the retained weeks.
  const firstDay = Math.floor((NOW - SPAN_MS) / DAY_MS) * DAY_MS + DAY_MS
  /** Runs `step` 40 % into 6 s of ingest at full speed: its time and the batches' p99 during it. */
  const duringIngest = async (step: () => Promise<void>) => {
    let span = { started: 0, ms: 0 }
    const samples = await load(6, async () => {
      const started = performance.now()
      await step()
      span = { started, ms: performance.now() - started }
    })
    const overlapping = samples
      .filter((s) => s.started < span.started + span.ms && s.started + s.ms > span.started)
      .map((s) => s.ms)
      .sort((a, b) => a - b)
    const all = samples.map((s) => s.ms).sort((a, b) => a - b)
    return {
      ms: span.ms,
      ingest: `ingest p99 during those 6 s ${fmt(p(all, 0.99))} ms; the ${overlapping.length} batches in flight across it: max ${fmt(overlapping.at(-1) ?? 0)} ms (target: within 2× of without)`,
    }
  }
  for (const [day, state] of [
    [firstDay, 'as the seed left it'],
    [firstDay + DAY_MS, 'at retention age'],
  ] as const) {
    const partition = partitionName(day)
    const archive = archiveName(day)
    // As the service does once a day has ended (and again after late events).
    await lifecycle.vacuumDay(partition)
    // At the KPI horizon: out of the table (the detach: the lock ingest could wait for), then its KPI indexes.
    let detachMs = 0
    const archiving = await duringIngest(async () => {
      const started = performance.now()
      for (let attempt = 1; ; attempt++) {
        try {
          await lifecycle.archivePartition(partition, day)
          break
        } catch (err) {
          if (!isLockTimeout(err) || attempt > 50) throw err
          await sleep(20 + Math.random() * 80)
        }
      }
      detachMs = performance.now() - started
      await lifecycle.dropArchiveKpiIndexes(archive)
    })
    console.log(
      `archive one day ${state} (out of the table, its KPI indexes dropped): ${fmt(archiving.ms)} ms, of which the detach ${fmt(detachMs)} ms`,
    )
    console.log(`  ${archiving.ingest}`)
    const files = await relationFiles(bulk, archive)
    if (files && day !== firstDay) {
      await bulk`checkpoint`
      execFileSync('sync', files)
      evict(files)
    }
    // At retention age: its events counted (from its session index), then the drop.
    const countStarted = performance.now()
    const dayRows = await lifecycle.countRows(archive)
    const countMs = performance.now() - countStarted
    const cached = files
      ? `${fmt(residentBytes(files) / 1e9)} of its ${fmt(files.reduce((sum, f) => sum + statSync(f).size, 0) / 1e9)} GB in the page cache`
      : 'page cache not read: the data directory is not readable here'
    const drop = await duringIngest(() => lifecycle.dropDetached(archive))
    console.log(
      `drop one day ${state} (${fmt(dayRows)} events, counted in ${fmt(countMs)} ms; ${cached}): ${fmt(drop.ms)} ms (target < 1 s)`,
    )
    console.log(`  ${drop.ingest}`)
  }

  // 5. Erase one session of 1,000 events spread over the week.
  const erasable = Array.from(
    { length: 1000 },
    (_, i) =>
      `{"event":"search_query","emitted_at_ms":${NOW - Math.floor((i * (SPAN_MS - DAY_MS)) / 1000) - 1000},"session_id":"${ERASED_SESSION}","query_id":"erase-${i}","query_text":"private words"}`,
  )
  for (let i = 0; i < 1000; i += BATCH) await post(`{"events":[${erasable.slice(i, i + BATCH).join(',')}]}`)
  const t0 = performance.now()
  const erased = await fetch(`${base}/api/v1/telemetry/docs-search/sessions/${ERASED_SESSION}`, {
    method: 'DELETE',
    headers: { 'x-api-key': KEY },
  }).then((r) => r.json())
  console.log(
    `erase one session of ${(erased as { erased_events: number }).erased_events} events: ${fmt(performance.now() - t0)} ms (target < 1 s)`,
  )
  completed = true
} finally {
  ddl?.release()
  if (child && child.exitCode === null) {
    child.kill('SIGTERM')
    await new Promise((resolve) => child!.once('exit', resolve))
  }
  await sql.end({ timeout: 5 })
  await bulk.end({ timeout: 5 })
  if (process.env.BENCH_KEEP === '1') console.log(`kept the database ${name}`)
  else await admin.unsafe(`drop database if exists "${name}" with (force)`)
  await admin.end()
  // Only a run that reached its end replaces the results file.
  if (completed) printed.write('Analysis: docs/telemetry-lifecycle.md and docs/performance.md.')
}

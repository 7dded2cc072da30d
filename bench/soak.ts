// `make bench-soak`: the service under full mixed load for SOAK_SECONDS (default 600), sampled
// every SOAK_SAMPLE_SECONDS: throughput and the server's resident memory (RSS). Flat means that
// from the second minute to the last, every minute's throughput and every minute's median RSS
// lie within ±10 % of the median over those minutes (stock postgres.js 3.4.9 lost half its
// throughput within minutes: test/db/postgres-pool-queue.test.ts). SOAK_SETUP: node-bound (default: PostgreSQL and the
// load generator on the other core, as PostgreSQL runs on its own host in production, so the
// figures are the service's own drift) or shared (PostgreSQL on the service's core: its
// checkpoints and vacuums then show as the service's dips). Beside each sample, the time a fixed
// piece of work takes on each core (core-speed.ts): on a shared VM the machine's own speed moves,
// and the report shows how closely the throughput followed it.
import { readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import autocannon from 'autocannon'
import { projectRoot } from '../src/paths.js'
import { correlation, startCoreSpeedProbes } from './core-speed.js'
import {
  LOAD_CPU,
  SERVER_CPU,
  type Setup,
  US_PER_TICK,
  cpuTicks,
  createBenchDatabase,
  mean,
  median,
  postgresCpuTicks,
  startService,
  stopServers,
} from './harness.js'
import { createBenchRequests, loadOptions } from './requests.js'
import { resultsHeader } from './results-file.js'

const SECONDS = Number(process.env.SOAK_SECONDS ?? 600)
const SAMPLE_SECONDS = Number(process.env.SOAK_SAMPLE_SECONDS ?? 10)
const CONNECTIONS = Number(process.env.SOAK_CONNECTIONS ?? 50)
const WARM_UP_SECONDS = Math.min(60, SECONDS / 5)
const SETUP = (process.env.SOAK_SETUP ?? 'node-bound') as Setup
const TOLERANCE = 0.1

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024

const bench = await createBenchDatabase('soak')
try {
  bench.setup(SETUP)
  const service = await startService(bench.url, 3611)
  const requests = await createBenchRequests(bench.sql, service.base)
  // The read and write mix of the benchmark cases, in turn; a quarter of the reviews forget.
  let n = 0
  const mix = [
    requests.getUser,
    requests.postNewUser,
    requests.replayUser,
    () => requests.dueList(),
    () => requests.review(n % 4 ? 'remembered' : 'forgot'),
  ]
  const run = autocannon(loadOptions(service.base, CONNECTIONS, SECONDS, () => mix[n++ % mix.length]!()))
  let answered = 0
  let failed = 0
  run.on('response', (_client, status) => {
    answered++
    if (status >= 300) failed++
  })

  // Per interval: throughput, RSS, and the service's and PostgreSQL's CPU per request, which tell
  // the service's drift apart from the database's (its tables grow through the whole run).
  const samples: { at: number; rps: number; rss: number; cpuUs: number; pgUs: number; coreMs?: number[] }[] = []
  const cores = startCoreSpeedProbes([SERVER_CPU, LOAD_CPU])
  const pid = service.process.pid!
  const started = performance.now()
  let last = 0
  let lastTicks = cpuTicks(pid)
  let lastPgTicks = postgresCpuTicks()
  const timer = setInterval(() => {
    const at = Math.round((performance.now() - started) / 1000)
    const ticks = cpuTicks(pid)
    const pgTicks = postgresCpuTicks()
    const requests = answered - last
    const perRequest = (spent: number) => (requests ? (spent * US_PER_TICK) / requests : 0)
    samples.push({
      at,
      rps: requests / SAMPLE_SECONDS,
      rss: rssMiB(pid),
      cpuUs: perRequest(ticks - lastTicks),
      pgUs: perRequest(pgTicks - lastPgTicks),
    })
    last = answered
    lastTicks = ticks
    lastPgTicks = pgTicks
    const s = samples.at(-1)!
    void cores.read().then((ms) => {
      s.coreMs = ms
      console.log(
        `${at}s ${Math.round(s.rps)} req/s, RSS ${s.rss.toFixed(1)} MiB, CPU/request ${Math.round(s.cpuUs)} µs (PostgreSQL ${Math.round(s.pgUs)}), fixed work ${ms.join(' / ')} ms`,
      )
    })
  }, SAMPLE_SECONDS * 1000)
  // RSS every second: a garbage-collected heap saws up and down between collections, so
  // flatness is judged on each minute's median against the run's, not on single readings.
  const rssReadings: { at: number; rss: number }[] = []
  const rssTimer = setInterval(
    () => rssReadings.push({ at: (performance.now() - started) / 1000, rss: rssMiB(pid) }),
    1000,
  )
  const result = await run
  clearInterval(timer)
  clearInterval(rssTimer)
  await cores.read() // the last sample's reading has come back
  cores.stop()

  const steady = rssReadings.filter((r) => r.at > WARM_UP_SECONDS)
  // Minutes 2..last (the first is warm-up): each one's median RSS and its mean throughput.
  const minuteCount = Math.floor(SECONDS / 60)
  const minuteNumbers = Array.from({ length: Math.max(0, minuteCount - 1) }, (_, i) => i + 2)
  const inMinute = <T extends { at: number }>(xs: T[], m: number) =>
    xs.filter((x) => x.at > (m - 1) * 60 && x.at <= m * 60)
  const minutes = minuteNumbers
    .map((m) => ({ m, rss: inMinute(rssReadings, m), rps: inMinute(samples, m) }))
    .filter((x) => x.rss.length > 0 && x.rps.length > 0)
    .map(({ m, rss, rps }) => ({ m, rss: median(rss.map((r) => r.rss)), rps: mean(rps.map((s) => s.rps)) }))
  const spread = (xs: number[]) => {
    if (xs.length === 0) return { mid: Number.NaN, worst: Number.NaN } // a run shorter than two minutes
    const mid = median(xs)
    return { mid, worst: Math.max(...xs.map((x) => Math.abs(x - mid) / mid)) }
  }
  const rssFlat = spread(minutes.map((x) => x.rss))
  const rpsFlat = spread(minutes.map((x) => x.rps))
  const verdict = (worst: number) => (worst <= TOLERANCE ? 'met' : '**not met**')
  const perMinute = Math.max(1, Math.round(60 / SAMPLE_SECONDS))
  const meanOf = (xs: typeof samples, of: 'rps' | 'cpuUs' | 'pgUs') => mean(xs.map((s) => s[of]))
  const firstMinute = meanOf(samples.slice(0, perMinute), 'rps')
  const lastMinute = meanOf(samples.slice(-perMinute), 'rps')
  const cpuFirst = meanOf(samples.slice(0, perMinute), 'cpuUs')
  const cpuLast = meanOf(samples.slice(-perMinute), 'cpuUs')
  // Minute 2 against the last: the first minute is the warm-up.
  const pgSecond = meanOf(samples.slice(perMinute, 2 * perMinute), 'pgUs')
  const pgLast = meanOf(samples.slice(-perMinute), 'pgUs')
  const probed = samples.filter((s) => s.at > 60 && s.coreMs)
  const coreLine = (i: number, name: string) => {
    const ms = probed.map((s) => s.coreMs![i]!)
    const r = correlation(
      probed.map((s) => s.rps),
      ms,
    )
    return `${name} ${Math.min(...ms).toFixed(0)}–${Math.max(...ms).toFixed(0)} ms (r = ${r.toFixed(2)})`
  }
  const report = [
    ...resultsHeader('Soak (make bench-soak)', `SOAK_SECONDS=${SECONDS} SOAK_SETUP=${SETUP} make bench-soak`),
    `Service on core ${SERVER_CPU}, autocannon on the other, PostgreSQL ${bench.postgresPinned ? (SETUP === 'shared' ? 'with the service' : 'with autocannon') : 'unpinned'} (${SETUP} set-up),`,
    `${CONNECTIONS} connections for ${SECONDS} s, a mix of GET user, POST user (new key), replayed POST, due list and review.`,
    '',
    `- requests: ${answered} answered, ${failed} non-2xx, ${result.errors} errors; mean ${Math.round(result.requests.average)} req/s, p99 ${result.latency.p99} ms`,
    `- throughput, minutes 2–${minuteCount}: per-minute means ${minutes.map((x) => Math.round(x.rps)).join(', ')} req/s; median ${Math.round(rpsFlat.mid)}, largest deviation ${(rpsFlat.worst * 100).toFixed(1)} % (target ≤ ${TOLERANCE * 100} %): ${verdict(rpsFlat.worst)}`,
    `- RSS, minutes 2–${minuteCount} (read every second): per-minute medians ${minutes.map((x) => x.rss.toFixed(1)).join(', ')} MiB; median ${rssFlat.mid.toFixed(1)}, largest deviation ${(rssFlat.worst * 100).toFixed(1)} % (target ≤ ${TOLERANCE * 100} %): ${verdict(rssFlat.worst)}; single readings ${Math.min(...steady.map((r) => r.rss)).toFixed(1)}–${Math.max(...steady.map((r) => r.rss)).toFixed(1)} MiB (the heap between collections)`,
    `- first minute ${Math.round(firstMinute)} req/s, last minute ${Math.round(lastMinute)} req/s; service CPU per request: first minute ${Math.round(cpuFirst)} µs, last minute ${Math.round(cpuLast)} µs (ratio ${(cpuLast / cpuFirst).toFixed(2)}); PostgreSQL's CPU per request (all its processes): minute 2 ${Math.round(pgSecond)} µs, last minute ${Math.round(pgLast)} µs (ratio ${(pgLast / pgSecond).toFixed(2)})`,
    `- the machine: a fixed piece of work (a random walk over 32 MiB, its own CPU time) took, from minute 2 on, ${coreLine(0, "on the service's core")}, ${coreLine(1, 'on the other core')}; r: its correlation with the sample's throughput, strongly negative when the machine's speed moved the throughput. The service's CPU per request against the work's time on its core: r = ${correlation(
      probed.map((s) => s.cpuUs),
      probed.map((s) => s.coreMs![0]!),
    ).toFixed(2)} (positive: the same requests cost more CPU while the core was slow)`,
    '',
    "| t (s) | req/s | RSS MiB | service CPU µs/request | PostgreSQL CPU µs/request | fixed work ms, service's core / other core |",
    '|---|---|---|---|---|---|',
    ...samples.map(
      (s) =>
        `| ${s.at} | ${Math.round(s.rps)} | ${s.rss.toFixed(1)} | ${Math.round(s.cpuUs)} | ${Math.round(s.pgUs)} | ${s.coreMs?.join(' / ') ?? '–'} |`,
    ),
    '',
  ].join('\n')
  writeFileSync(path.join(projectRoot, 'bench/soak.md'), report)
  console.log(`\n${report}`)
} finally {
  await stopServers()
  await bench.drop()
}

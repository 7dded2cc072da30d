// `make bench-soak`: the service under full mixed load for SOAK_SECONDS (default 300), sampled
// every SOAK_SAMPLE_SECONDS: throughput and the server's resident memory (RSS). Flat means the
// RSS after warm-up stays within ±10 % of its median and the last minute serves as many
// requests as the first (stock postgres.js 3.4.9 lost half within minutes; see patches/).
import { readFileSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import autocannon from 'autocannon'
import { projectRoot } from '../src/paths.js'
import { SERVER_CPU, cpuTicks, createBenchDatabase, median, startService, stopServers } from './harness.js'
import { createBenchRequests, loadOptions } from './requests.js'

const SECONDS = Number(process.env.SOAK_SECONDS ?? 300)
const SAMPLE_SECONDS = Number(process.env.SOAK_SAMPLE_SECONDS ?? 10)
const CONNECTIONS = Number(process.env.SOAK_CONNECTIONS ?? 50)
const WARM_UP_SECONDS = Math.min(60, SECONDS / 5)

const rssMiB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024

const bench = await createBenchDatabase('soak')
try {
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

  // Per interval: throughput, RSS, and the service's own CPU per request, which tells the
  // service's drift apart from the database's (its tables grow through the whole run).
  const samples: { at: number; rps: number; rss: number; cpuUs: number }[] = []
  const pid = service.process.pid!
  const started = performance.now()
  let last = 0
  let lastTicks = cpuTicks(pid)
  const timer = setInterval(() => {
    const at = Math.round((performance.now() - started) / 1000)
    const ticks = cpuTicks(pid)
    const requests = answered - last
    samples.push({ at, rps: requests / SAMPLE_SECONDS, rss: rssMiB(pid), cpuUs: requests ? ((ticks - lastTicks) * 10_000) / requests : 0 })
    last = answered
    lastTicks = ticks
    const s = samples.at(-1)!
    console.log(`${at}s ${Math.round(s.rps)} req/s, RSS ${s.rss.toFixed(1)} MiB, ${Math.round(s.cpuUs)} µs CPU/request`)
  }, SAMPLE_SECONDS * 1000)
  // RSS every second: a garbage-collected heap saws up and down between collections, so
  // flatness is judged on each minute's median against the run's, not on single readings.
  const rssReadings: { at: number; rss: number }[] = []
  const rssTimer = setInterval(() => rssReadings.push({ at: (performance.now() - started) / 1000, rss: rssMiB(pid) }), 1000)
  const result = await run
  clearInterval(timer)
  clearInterval(rssTimer)

  const steady = rssReadings.filter((r) => r.at > WARM_UP_SECONDS)
  const rssMedian = median(steady.map((r) => r.rss))
  const minutes = Array.from({ length: Math.ceil(SECONDS / 60) }, (_, m) => rssReadings.filter((r) => r.at > m * 60 && r.at <= (m + 1) * 60 && r.at > WARM_UP_SECONDS))
    .filter((xs) => xs.length > 0)
    .map((xs) => median(xs.map((r) => r.rss)))
  const rssSpread = Math.max(...minutes.map((m) => Math.abs(m - rssMedian) / rssMedian))
  const perMinute = Math.max(1, Math.round(60 / SAMPLE_SECONDS))
  const mean = (xs: typeof samples) => xs.reduce((a, s) => a + s.rps, 0) / xs.length
  const firstMinute = mean(samples.slice(0, perMinute))
  const lastMinute = mean(samples.slice(-perMinute))
  const cpuMean = (xs: typeof samples) => xs.reduce((a, s) => a + s.cpuUs, 0) / xs.length
  const cpuFirst = cpuMean(samples.slice(0, perMinute))
  const cpuLast = cpuMean(samples.slice(-perMinute))
  const report = [
    '# Soak results',
    '',
    `${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, Node ${process.version}. Service${bench.postgresPinned ? ' and PostgreSQL' : ''} on core ${SERVER_CPU}, autocannon on the other,`,
    `${CONNECTIONS} connections for ${SECONDS} s, a mix of GET user, POST user (new key), replayed POST, due list and review.`,
    '',
    `- requests: ${answered} answered, ${failed} non-2xx, ${result.errors} errors; mean ${Math.round(result.requests.average)} req/s, p99 ${result.latency.p99} ms`,
    `- throughput: first minute ${Math.round(firstMinute)} req/s, last minute ${Math.round(lastMinute)} req/s (ratio ${(lastMinute / firstMinute).toFixed(2)})`,
    `- service CPU per request: first minute ${Math.round(cpuFirst)} µs, last minute ${Math.round(cpuLast)} µs (ratio ${(cpuLast / cpuFirst).toFixed(2)})`,
    `- RSS after ${WARM_UP_SECONDS} s of warm-up (read every second): median ${rssMedian.toFixed(1)} MiB; per-minute medians ${minutes.map((m) => m.toFixed(1)).join(', ')} MiB, largest deviation from the median ${(rssSpread * 100).toFixed(1)} % (target ≤ 10 %); single readings ${Math.min(...steady.map((r) => r.rss)).toFixed(1)}–${Math.max(...steady.map((r) => r.rss)).toFixed(1)} MiB (the heap between collections)`,
    '',
    '| t (s) | req/s | RSS MiB | service CPU µs/request |',
    '|---|---|---|---|',
    ...samples.map((s) => `| ${s.at} | ${Math.round(s.rps)} | ${s.rss.toFixed(1)} | ${Math.round(s.cpuUs)} |`),
    '',
  ].join('\n')
  writeFileSync(path.join(projectRoot, 'bench/soak.md'), report)
  console.log(`\n${report}`)
} finally {
  await stopServers()
  await bench.drop()
}

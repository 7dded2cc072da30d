// `make bench`: the service against a bare Fastify + postgres.js "ceiling" doing only the SQL
// each route needs, interleaved in one run on a fresh database. Servers run on core 0, this
// driver (autocannon) on core 1 (the Makefile pins it); PostgreSQL on core 1 in the node-bound
// set-up (the server has its core alone) and on core 0 in the shared one. Absolute numbers on a shared machine
// drift by tens of percent between minutes, so every figure is a ratio to a reference measured
// right next to it: each run of the service is paired with a run of its reference (the order
// alternating), and the ratio reported is the median of the paired ratios.
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import autocannon from 'autocannon'
import { projectRoot } from '../src/paths.js'
import {
  API_KEY as KEY,
  LOAD_CPU,
  SERVER_CPU,
  US_PER_TICK,
  type Server,
  type Setup,
  busyShare,
  coreTicks,
  cpuTicks,
  createBenchDatabase,
  median,
  startCeiling,
  startService,
  stopServers,
} from './harness.js'
import { type BenchRequest, createBenchRequests, loadOptions } from './requests.js'
import { METRICS_WINDOWS, METRICS_TARGETS_MS, seedDocsSearch, TELEMETRY_SHAPE } from './telemetry-seed.js'
import { resultsHeader } from './results-file.js'

// Many short pairs: on a shared VM the speed a process gets moves within seconds (two 5 s runs
// of one server have read 51 and 75 µs of CPU per request), and a pair's two runs should see the
// same speed; the median of more pairs lets fewer unlucky ones decide.
const DURATION = Number(process.env.BENCH_DURATION ?? 2)
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2)
const RUNS = Number(process.env.BENCH_RUNS ?? 12)
// The telemetry batch takes ~0.3 s a request: a 2 s run holds too few for a p99, so 5 s runs.
const LONG_DURATION = Number(process.env.BENCH_LONG_DURATION ?? 5)
const LONG_RUNS = Number(process.env.BENCH_LONG_RUNS ?? 5)
const CONNECTIONS = (process.env.BENCH_CONNECTIONS ?? '50').split(',').map(Number)
// Both set-ups by default; BENCH_SETUPS=node-bound (or shared) runs one.
const SETUPS = (process.env.BENCH_SETUPS ?? 'node-bound,shared').split(',').map((x) => x.trim() as Setup)
const SETUP_LABEL: Record<Setup, string> = { 'node-bound': '(a) node-bound', shared: '(b) shared' }
// The ratios of the table before the node-bound set-up existed (PostgreSQL on the servers' core,
// 50 connections, 2026-11-23): the shared set-up must not fall below them.
const BEFORE: Record<string, number> = {
  'GET user': 0.8,
  'POST user (new key)': 0.88,
  'PATCH user': 0.79,
  'GET due list (50 rows)': 0.72,
  'POST review': 0.58,
  'telemetry batch (500 events)': 0.68,
}
// Noise between two runs on this shared machine: a ratio this far under BEFORE still counts as "not worse".
const NOISE = 0.05
const RESULTS = path.join(projectRoot, 'bench/results.md')
// Comma-separated case-name prefixes to run (all when unset), e.g. BENCH_CASES='GET user,POST user'.
const ONLY = process.env.BENCH_CASES?.split(',').map((x) => x.trim().toLowerCase())

interface Case {
  name: string
  /** The target at 50 connections in the node-bound set-up: the ratio to the ceiling's same route. */
  target: number
  /** events per request, for throughput in events/s */
  perRequest?: number
  request: () => BenchRequest
  /** What the ceiling is sent, when it differs from `request` (its replay route). */
  ceilingRequest?: () => BenchRequest
  /** Slow requests: LONG_RUNS pairs of LONG_DURATION s instead of RUNS of DURATION. */
  long?: boolean
}

interface Measurement {
  rps: number
  p50: number
  p99: number
  bad: number
  /** Answers in the run, and the server's own CPU over it (clock ticks of utime + stime). */
  answers: number
  serverTicks: number
  /** How busy the servers' core was over the run (0..1): near 1, the server was what limited the run. */
  coreBusy: number
}

async function drive(
  server: Server,
  next: () => BenchRequest,
  connections: number,
  duration = DURATION,
): Promise<Measurement> {
  const base = server.base
  const [ticks0, core0] = [cpuTicks(server.process.pid!), coreTicks(SERVER_CPU)]
  const result = await autocannon(loadOptions(base, connections, duration, next))
  const [ticks1, core1] = [cpuTicks(server.process.pid!), coreTicks(SERVER_CPU)]
  // Which answers were not 2xx (shedding 503, timeouts...): the table counts them, this names them.
  const stats = (result as unknown as { statusCodeStats?: Record<string, { count: number }> }).statusCodeStats ?? {}
  const other = Object.entries(stats).filter(([status]) => !status.startsWith('2'))
  if (other.length > 0 || result.errors > 0) {
    console.warn(
      `  not 2xx at ${base}: ${other.map(([status, { count }]) => `${status} x ${count}`).join(', ') || 'none'}; connection errors ${result.errors}`,
    )
  }
  // Answers over the run's measured length: a short run's per-second samples have a partial last second.
  return {
    rps: result.requests.total / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    bad: result.non2xx + result.errors,
    answers: result.requests.total,
    serverTicks: ticks1 - ticks0,
    coreBusy: busyShare(core0, core1),
  }
}

/** The server's CPU per answer over a side's runs, in µs (a ratio of sums: a tick is 10 ms, too coarse per run). */
const cpuPerAnswer = (runs: Measurement[]) =>
  (runs.reduce((a, x) => a + x.serverTicks, 0) * US_PER_TICK) /
  Math.max(
    runs.reduce((a, x) => a + x.answers, 0),
    1,
  )

const range = (xs: number[], digits = 0) => `${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`

// PostgreSQL moves between cores with the set-up: a VACUUM during a run would land on whichever
// server happened to be measured, so no stand-in timer; the cases settle the database between them.
const bench = await createBenchDatabase('bench', { vacuumStandIn: false })
const sql = bench.sql

try {
  // BENCH_PROFILE: a folder for a V8 CPU profile of the service, written when it stops.
  const service = await startService(bench.url, 3601, process.env.BENCH_PROFILE)
  const ceiling = await startCeiling(bench.url, 3602)
  const requests = await createBenchRequests(sql, service.base)

  // Targets for 50 connections in the node-bound set-up.
  const cases: Case[] = [
    { name: 'GET user', target: 0.8, request: requests.getUser },
    { name: 'POST user (new key)', target: 0.9, request: requests.postNewUser },
    // A replay against the ceiling's bare-stack replay (body parsed, one indexed read, the stored
    // answer sent; no validation or request hash).
    {
      name: 'POST user (replay)',
      target: 0.8,
      request: requests.replayUser,
      ceilingRequest: requests.replayUserOnCeiling,
    },
    { name: 'PATCH user', target: 0.85, request: requests.patchUser },
    { name: 'GET due list (50 rows)', target: 0.8, request: () => requests.dueList(requests.dueListLearner) },
    { name: 'POST review', target: 0.75, request: () => requests.review() },
    {
      name: 'telemetry batch (500 events)',
      target: 0.8,
      perRequest: 500,
      request: requests.telemetryBatch,
      long: true,
    },
  ]

  const rows: string[] = []
  const results: {
    setup: Setup
    c: Case
    connections: number
    rps: number
    ratio: number
    p99Ratio: number
    cpuRatio: number
    bad: number
    ceilingBad: number
  }[] = []
  for (const c of cases) {
    if (ONLY && !ONLY.some((prefix) => c.name.toLowerCase().startsWith(prefix))) continue
    const ceilingRequest = c.ceilingRequest ?? c.request
    for (const connections of CONNECTIONS) {
      for (const setup of SETUPS) {
        bench.setup(setup)
        await bench.settle()
        // Warm both up (JIT, pools, caches), then measure in pairs, alternating which goes first.
        await drive(service, c.request, connections, WARMUP)
        await drive(ceiling, ceilingRequest, connections, WARMUP)
        const pairs: { s: Measurement; r: Measurement }[] = []
        const [runs, duration] = c.long ? [LONG_RUNS, LONG_DURATION] : [RUNS, DURATION]
        for (let run = 0; run < runs; run++) {
          if (run % 2 === 0) {
            const s = await drive(service, c.request, connections, duration)
            pairs.push({ s, r: await drive(ceiling, ceilingRequest, connections, duration) })
          } else {
            const r = await drive(ceiling, ceilingRequest, connections, duration)
            pairs.push({ s: await drive(service, c.request, connections, duration), r })
          }
        }
        const per = c.perRequest ?? 1
        const ratios = pairs.map((p) => p.s.rps / p.r.rps)
        const p99Ratios = pairs.map((p) => p.s.p99 / Math.max(p.r.p99, 1))
        const s = pairs.map((p) => p.s)
        const r = pairs.map((p) => p.r)
        const bad = s.reduce((a, x) => a + x.bad, 0)
        // A ceiling that answers errors measures its error path: the pair is void, and the row says so.
        const ceilingBad = r.reduce((a, x) => a + x.bad, 0)
        // The replica's own cost: what decides how many replicas a deployment needs.
        const [sCpu, rCpu] = [cpuPerAnswer(s), cpuPerAnswer(r)]
        const busy = (xs: Measurement[]) => `${(median(xs.map((x) => x.coreBusy)) * 100).toFixed(0)} %`
        results.push({
          setup,
          c,
          connections,
          rps: median(s.map((x) => x.rps)) * per,
          ratio: median(ratios),
          p99Ratio: median(p99Ratios),
          cpuRatio: rCpu / sCpu,
          bad,
          ceilingBad,
        })
        rows.push(
          `| ${c.name} | ${SETUP_LABEL[setup]} | ${connections} | ${Math.round(median(s.map((x) => x.rps)) * per)} | ${Math.round(median(r.map((x) => x.rps)) * per)} | **${median(ratios).toFixed(2)}** (${range(ratios, 2)}) | ${median(s.map((x) => x.p50))} / ${median(s.map((x) => x.p99))} | ${median(r.map((x) => x.p50))} / ${median(r.map((x) => x.p99))} | ${sCpu.toFixed(0)} / ${rCpu.toFixed(0)} | ${busy(s)} / ${busy(r)} | ${bad}${ceilingBad > 0 ? ` (ceiling: ${ceilingBad})` : ''} |`,
        )
        console.log(rows.at(-1))
      }
    }
  }

  // Telemetry metrics over 10M events (TELEMETRY_SHAPE), four requests per window after a warm-up.
  const metricsRows: { window: number; timings: number[] }[] = []
  if (!ONLY || ONLY.some((prefix) => 'telemetry metrics'.startsWith(prefix))) {
    bench.setup('node-bound')
    // Only the seeded events: the batch case's ones (~1M, all within the last minutes) would
    // land in the small windows' edge hours.
    await sql`truncate docs_search_events, docs_search_queries`
    const seeded = await seedDocsSearch(sql, Date.now())
    console.log(`seeded ${seeded.events} events in ${seeded.seconds.toFixed(0)} s`)
    await bench.settle()
    for (const window of METRICS_WINDOWS) {
      const metrics = () =>
        fetch(`${service.base}/api/v1/telemetry/docs-search/metrics?window_minutes=${window}`, {
          headers: { 'x-api-key': KEY },
        })
      await (await metrics()).json() // warm-up: caches and plans
      const timings: number[] = []
      for (let i = 0; i < 4; i++) {
        const t0 = performance.now()
        const res = await metrics()
        if (res.status !== 200) throw new Error(`metrics answered ${res.status}`)
        await res.json()
        timings.push(performance.now() - t0)
      }
      metricsRows.push({ window, timings })
      console.log(`metrics over 10M events, window ${window} min: ${median(timings).toFixed(0)} ms (${range(timings)})`)
    }
  }

  const fmt = (x: number | undefined, digits = 2) => (x === undefined || Number.isNaN(x) ? 'n/a' : x.toFixed(digits))
  const met = (ok: boolean) => (ok ? 'met' : '**not met**')
  const targetRows = results
    .filter((r) => r.connections === 50)
    .map((r) => {
      const before = BEFORE[r.c.name]
      const goal =
        r.ceilingBad > 0
          ? `**void**: the ceiling answered ${r.ceilingBad} non-2xx`
          : r.setup === 'node-bound'
            ? `≥ ${r.c.target.toFixed(2)}, p99 ≤ 2×, 0 non-2xx: ${met(r.ratio >= r.c.target && r.p99Ratio <= 2 && r.bad === 0)}`
            : before === undefined
              ? `(no earlier figure); p99 ≤ 2×, 0 non-2xx: ${met(r.p99Ratio <= 2 && r.bad === 0)}`
              : `not below ${before.toFixed(2)} (± ${NOISE}): ${met(r.ratio >= before - NOISE)}; p99 ≤ 2×, 0 non-2xx: ${met(r.p99Ratio <= 2 && r.bad === 0)}`
      return `| ${r.c.name} | ${SETUP_LABEL[r.setup]} | ${fmt(r.ratio)} | ${fmt(r.cpuRatio)} | ${fmt(r.p99Ratio)}× | ${r.bad} | ${goal} |`
    })
  const table = [
    ...resultsHeader('Service vs ceiling (make bench)', 'make bench'),
    `PostgreSQL 15 on the same machine (when shared and busy: ratios, not absolute figures).`,
    `Servers pinned to core ${SERVER_CPU}, autocannon to core ${LOAD_CPU}. PostgreSQL${bench.postgresPinned ? '' : ' (could not be pinned: both cores)'}: (a) node-bound, on core ${LOAD_CPU} with autocannon, the server alone on its core;`,
    `(b) shared, on core ${SERVER_CPU} with the servers. Per case and set-up: ${WARMUP} s warm-up each, then ${RUNS} pairs of ${DURATION} s runs (the telemetry batch: ${LONG_RUNS} of ${LONG_DURATION} s)`,
    `(service, ceiling; the order alternating). Ratio: median of the paired ratios (min–max); req/s and latencies: medians. The ceiling is`,
    `bench/ceiling-server.ts (bare Fastify 5 + postgres.js, the same SQL); the replay's ceiling is its bare-stack replay route.`,
    `Server CPU: each server's own utime + stime from /proc over all its runs, per answer (service / ceiling); servers' core busy: the median`,
    `run's (service / ceiling): near 100 % the server limited the run, below it the load generator or PostgreSQL did. CPU ratio: the`,
    `ceiling's µs / the service's. A server below 100 % spends more per request (fewer requests per turn of its event loop), so the`,
    `CPU ratio compares Node's work fairly where both cores are near 100 %.`,
    ``,
    `| case | set-up | conns | req/s | ceiling req/s | ratio | p50/p99 ms | ceiling p50/p99 ms | server CPU µs/request | servers' core busy | non-2xx |`,
    `|---|---|---|---|---|---|---|---|---|---|---|`,
    ...rows,
    ``,
    `Telemetry batch rows are events/s (their CPU per request is per batch). Targets at 50 connections: (a) the target ratios; (b) not worse than the table before (PostgreSQL on the servers' core):`,
    ``,
    `| case | set-up | ratio | CPU ratio | p99 / ceiling p99 | non-2xx | target |`,
    `|---|---|---|---|---|---|---|`,
    ...targetRows,
    ``,
    `Telemetry metrics over ${TELEMETRY_SHAPE} (4 requests per window after a warm-up; median and min–max):`,
    ``,
    `| window | median ms | min–max ms | target |`,
    `|---|---|---|---|`,
    ...metricsRows.map((r) => {
      const target = METRICS_TARGETS_MS[r.window]
      return `| ${r.window} min | ${median(r.timings).toFixed(0)} | ${range(r.timings)} | ${target === undefined ? '' : `≤ ${target} ms: ${met(median(r.timings) <= target)}`} |`
    }),
    ``,
  ].join('\n')
  // A partial run (BENCH_CASES) or a traced one (BENCH_OTEL) only prints: bench/results.md always
  // holds a full run of the service as deployed by default (tracing off). Analysis: docs/performance.md.
  if (!ONLY && !process.env.BENCH_OTEL) writeFileSync(RESULTS, `${table}\nAnalysis: docs/performance.md.\n`)
  console.log(`\n${table}`)
} finally {
  await stopServers()
  await bench.drop()
}

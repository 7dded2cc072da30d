// `make bench`: the service against an expert's bare Fastify + postgres.js "ceiling" of the same
// routes (docs/performance.md, "Method"), interleaved in one run on a fresh database. Servers run on core 0, this
// driver and wrk on core 1 (the Makefile pins it); PostgreSQL on core 1 in the node-bound
// set-up (the server has its core alone) and on core 0 in the shared one. Absolute numbers on a shared machine
// drift by tens of percent between minutes, so every figure is a ratio to a reference measured
// right next to it: each run of the service is paired with a run of its reference (the order
// alternating), and the ratio reported is the median of the paired ratios.
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import { projectRoot } from '../src/paths.js'
import * as h from './harness.js'
import { type BenchRequest, createBenchRequests } from './requests.js'
import { runWrk, UNIQUE_ID, UNIQUE_UUID } from './wrk.js'
import { METRICS_WINDOWS, METRICS_TARGETS_MS, seedDocsSearch, TELEMETRY_SHAPE } from './telemetry-seed.js'
import { resultsHeader } from './results-file.js'

// Many short pairs: on a shared VM the speed a process gets moves within seconds (two 5 s runs
// of one server have read 51 and 75 µs of CPU per request), and a pair's two runs should see the
// same speed; the median of more pairs lets fewer unlucky ones decide.
const [DURATION, WARMUP, RUNS] = [h.setting('DURATION', 2), h.setting('WARMUP', 2), h.setting('RUNS', 12)]
// The telemetry batch takes ~0.3 s a request: a 2 s run holds too few for a p99, so 5 s runs.
const [LONG_DURATION, LONG_RUNS] = [h.setting('LONG_DURATION', 5), h.setting('LONG_RUNS', 5)]
const CONNECTIONS = (process.env.BENCH_CONNECTIONS ?? '50').split(',').map(Number)
// Both set-ups by default; BENCH_SETUPS=node-bound (or shared) runs one.
const SETUPS = (process.env.BENCH_SETUPS ?? 'node-bound,shared').split(',').map((x) => x.trim() as h.Setup)
const SETUP_LABEL: Record<h.Setup, string> = { 'node-bound': '(a) node-bound', shared: '(b) shared' }
const RESULTS = path.join(projectRoot, 'bench/results.md')
// Comma-separated case-name prefixes to run (all when unset), e.g. BENCH_CASES='GET user,POST user'.
const ONLY = process.env.BENCH_CASES?.split(',').map((x) => x.trim().toLowerCase())
// BENCH_BASELINE: another build's folder (an earlier commit, built) in the ceiling's place, sent the
// service's requests: each ratio reads this build against that one. Such a run only prints.
const BASELINE = process.env.BENCH_BASELINE

interface Case {
  name: string
  /** The target at 50 connections in both set-ups: the ratio to the ceiling's same route. */
  target: number
  /** The most CPU per request the service may spend, as a multiple of the ceiling's (the reads). */
  maxCpu?: number
  /** events per request, for throughput in events/s */
  perRequest?: number
  request: () => BenchRequest
  /** What the ceiling is sent, when it differs from `request` (its replay route). */
  ceilingRequest?: () => BenchRequest
  /** How many requests wrk sends in turn (distinct learners and notes); unique values are filled per request. */
  sample?: number
  /** Slow requests: LONG_RUNS pairs of LONG_DURATION s instead of RUNS of DURATION. */
  long?: boolean
}

// A run: wrk's figures, the answers in it, the server's own CPU over it (clock ticks of utime +
// stime), how busy the servers' core was (0..1) and PostgreSQL's CPU as a share of one core (0..1):
// near 1, that was what limited the run.
type Measurement = Awaited<ReturnType<typeof drive>>

/** At or above this share of its core, a process is what limits a run (docs/performance.md, "Method"). */
const SATURATED = 0.95

/** What limited a run: the server's core, PostgreSQL's, or neither (then the run judges nothing). */
function limit(m: Measurement): 'server' | 'PostgreSQL' | 'not saturated' {
  if (m.coreBusy >= SATURATED) return 'server'
  if (m.postgresBusy >= SATURATED) return 'PostgreSQL'
  return 'not saturated'
}

async function drive(server: h.Server, list: BenchRequest[], connections: number, duration = DURATION) {
  const pid = server.process.pid!
  const [ticks0, core0, pg0, t0] = [h.cpuTicks(pid), h.coreTicks(h.SERVER_CPU), h.postgresCpuTicks(), performance.now()]
  const result = await runWrk(server.base, connections, duration, list)
  const [ticks1, core1, pg1, t1] = [h.cpuTicks(pid), h.coreTicks(h.SERVER_CPU), h.postgresCpuTicks(), performance.now()]
  if (result.bad > 0) console.warn(`  ${result.bad} answers not 2xx (or errors) at ${server.base}`)
  const postgresBusy = ((pg1 - pg0) * h.US_PER_TICK) / ((t1 - t0) * 1000)
  return {
    ...result,
    answers: result.total,
    serverTicks: ticks1 - ticks0,
    coreBusy: h.busyShare(core0, core1),
    postgresBusy,
  }
}

/** The server's CPU per answer over a side's runs, in µs (a ratio of sums: a tick is 10 ms, too coarse per run). */
const cpuPerAnswer = (runs: Measurement[]) =>
  (h.sum(runs.map((x) => x.serverTicks)) * h.US_PER_TICK) / Math.max(h.sum(runs.map((x) => x.answers)), 1)

const range = (xs: number[], digits = 0) => `${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`

// PostgreSQL moves between cores with the set-up: a VACUUM during a run would land on whichever
// server happened to be measured, so no stand-in timer; the cases settle the database between them.
const bench = await h.createBenchDatabase('bench')
const sql = bench.sql

try {
  // BENCH_PROFILE: a folder for a V8 CPU profile of the service, written when it stops.
  const service = await h.startService(bench.url, 3601, process.env.BENCH_PROFILE)
  const ceiling = BASELINE
    ? await h.startService(bench.url, 3602, undefined, undefined, {}, path.resolve(BASELINE, 'dist/src/server.js'))
    : await h.startCeiling(bench.url, 3602)
  const requests = await createBenchRequests(sql, service.base, { id: () => UNIQUE_ID, uuid: () => UNIQUE_UUID })

  // Targets for 50 connections in the node-bound set-up.
  const cases: Case[] = [
    { name: 'GET user', target: 0.85, maxCpu: 1.2, request: requests.getUser },
    { name: 'POST user (new key)', target: 0.9, request: requests.postNewUser },
    // A replay against the ceiling's bare-stack replay (body parsed, one indexed read, the stored
    // answer sent; no validation or request hash).
    {
      name: 'POST user (replay)',
      target: 0.85,
      maxCpu: 1.2,
      sample: 1,
      request: requests.replayUser,
      ceilingRequest: requests.replayUserOnCeiling,
    },
    { name: 'PATCH user', target: 0.9, request: requests.patchUser },
    {
      name: 'GET due list (50 rows)',
      target: 0.85,
      request: () => requests.dueList(requests.dueListLearner),
      sample: 1,
    },
    { name: 'POST review', target: 0.9, request: () => requests.review() },
    {
      name: 'telemetry batch (500 events)',
      target: 0.85,
      perRequest: 500,
      request: requests.telemetryBatch,
      long: true,
      sample: 20,
    },
  ]

  const fmt = (x: number | undefined, digits = 2) => (x === undefined || Number.isNaN(x) ? 'n/a' : x.toFixed(digits))
  const met = (ok: boolean) => (ok ? 'met' : '**not met**')
  const [rows, targetRows]: [string[], string[]] = [[], []]
  for (const c of cases) {
    if (ONLY && !ONLY.some((prefix) => c.name.toLowerCase().startsWith(prefix))) continue
    const sample = (next: () => BenchRequest) => Array.from({ length: c.sample ?? 2000 }, next)
    const [serviceList, ceilingList] = [sample(c.request), sample((!BASELINE && c.ceilingRequest) || c.request)]
    for (const connections of CONNECTIONS) {
      for (const setup of SETUPS) {
        bench.setup(setup)
        await bench.settle()
        // Warm both up (JIT, pools, caches), then measure in pairs, alternating which goes first.
        await drive(service, serviceList, connections, WARMUP)
        await drive(ceiling, ceilingList, connections, WARMUP)
        const [runs, duration] = c.long ? [LONG_RUNS, LONG_DURATION] : [RUNS, DURATION]
        const pairs = await h.alternate(
          runs,
          () => drive(service, serviceList, connections, duration),
          () => drive(ceiling, ceilingList, connections, duration),
        )
        const per = c.perRequest ?? 1
        const ratios = pairs.map((p) => p.a.rps / p.b.rps)
        const p99Ratios = pairs.map((p) => p.a.p99 / Math.max(p.b.p99, 1))
        const [s, r] = [pairs.map((p) => p.a), pairs.map((p) => p.b)]
        // A ceiling that answers errors measures its error path: the pair is void, and the row says so.
        const [bad, ceilingBad] = [h.sum(s.map((x) => x.bad)), h.sum(r.map((x) => x.bad))]
        // The replica's own cost: what decides how many replicas a deployment needs.
        const [sCpu, rCpu] = [cpuPerAnswer(s), cpuPerAnswer(r)]
        const pct = (x: number) => `${(x * 100).toFixed(0)} %`
        const busy = (xs: Measurement[]) => pct(h.median(xs.map((x) => x.coreBusy)))
        const pgBusy = (xs: Measurement[]) => pct(h.median(xs.map((x) => x.postgresBusy)))
        // The limit most of a side's runs had.
        const sideLimit = (xs: Measurement[]) => {
          const counts = new Map<string, number>()
          for (const x of xs) counts.set(limit(x), (counts.get(limit(x)) ?? 0) + 1)
          return [...counts].sort((p, q) => q[1] - p[1])[0]![0]
        }
        const limits: [string, string] = [sideLimit(s), sideLimit(r)]
        const [ratio, p99Ratio, cpuRatio] = [h.median(ratios), h.median(p99Ratios), sCpu / rCpu]
        if (connections === 50) {
          const cpuOk = c.maxCpu === undefined || cpuRatio <= c.maxCpu
          const goal =
            ceilingBad > 0
              ? `**void**: the ceiling answered ${ceilingBad} non-2xx`
              : limits.includes('not saturated')
                ? '**not saturated**: the driver, not a server or PostgreSQL, set the pace; judges nothing'
                : `≥ ${c.target.toFixed(2)}${c.maxCpu ? `, CPU ≤ ${c.maxCpu.toFixed(2)}×` : ''}, p99 ≤ 2×, 0 non-2xx: ${met(ratio >= c.target && cpuOk && p99Ratio <= 2 && bad === 0)}`
          targetRows.push(
            `| ${c.name} | ${SETUP_LABEL[setup]} | ${fmt(ratio)} | ${fmt(cpuRatio)}× | ${fmt(p99Ratio)}× | ${bad} | ${goal} |`,
          )
        }
        rows.push(
          `| ${c.name} | ${SETUP_LABEL[setup]} | ${connections} | ${Math.round(h.median(s.map((x) => x.rps)) * per)} | ${Math.round(h.median(r.map((x) => x.rps)) * per)} | **${h.median(ratios).toFixed(2)}** (${range(ratios, 2)}) | ${h.median(s.map((x) => x.p50))} / ${h.median(s.map((x) => x.p99))} | ${h.median(r.map((x) => x.p50))} / ${h.median(r.map((x) => x.p99))} | ${sCpu.toFixed(0)} / ${rCpu.toFixed(0)} | ${busy(s)} / ${busy(r)} | ${pgBusy(s)} / ${pgBusy(r)} | ${limits.join(' / ')} | ${bad}${ceilingBad > 0 ? ` (ceiling: ${ceilingBad})` : ''} |`,
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
      const url = `${service.base}/api/v1/telemetry/docs-search/metrics?window_minutes=${window}`
      const metrics = () => fetch(url, { headers: { 'x-api-key': h.API_KEY } })
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
      console.log(`metrics, window ${window} min: ${h.median(timings).toFixed(0)} ms (${range(timings)})`)
    }
  }

  const table = [
    ...resultsHeader('Service vs ceiling (make bench)', 'make bench'),
    `PostgreSQL 15 on the same machine (when shared and busy: ratios, not absolute figures).`,
    `Servers pinned to core ${h.SERVER_CPU}, wrk (one thread, Lua: bench/wrk.ts) to core ${h.LOAD_CPU}. PostgreSQL${bench.postgresPinned ? '' : ' (could not be pinned: both cores)'}: (a) node-bound, on core ${h.LOAD_CPU} with wrk, the server alone on its core;`,
    `(b) shared, on core ${h.SERVER_CPU} with the servers. Per case and set-up: ${WARMUP} s warm-up each, then ${RUNS} pairs of ${DURATION} s runs (the telemetry batch: ${LONG_RUNS} of ${LONG_DURATION} s)`,
    `(service, ceiling; the order alternating). Ratio: median of the paired ratios (min–max); req/s and latencies: medians. The ceiling is`,
    `bench/ceiling-server.ts, an expert's version of each route (rules: docs/performance.md, "Method"); the replay's ceiling is its bare-stack replay route.`,
    `Server CPU: each server's own utime + stime from /proc over all its runs, per answer (service / ceiling). Core busy: the servers' core,`,
    `median run (service / ceiling); PostgreSQL busy: its processes' CPU as a share of one core. Limit: what held most runs of a side at`,
    `≥ ${SATURATED * 100} % (the server's core or PostgreSQL); "not saturated" means the driver set the pace, and the row judges nothing.`,
    `CPU ratio: the service's µs per request / the ceiling's.`,
    ``,
    `| case | set-up | conns | req/s | ceiling req/s | ratio | p50/p99 ms | ceiling p50/p99 ms | server CPU µs/request | servers' core busy | PostgreSQL busy | limit | non-2xx |`,
    `|---|---|---|---|---|---|---|---|---|---|---|---|---|`,
    ...rows,
    ``,
    `Telemetry batch rows are events/s (their CPU per request is per batch). Targets at 50 connections, both set-ups:`,
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
      return `| ${r.window} min | ${h.median(r.timings).toFixed(0)} | ${range(r.timings)} | ${target === undefined ? '' : `≤ ${target} ms: ${met(h.median(r.timings) <= target)}`} |`
    }),
    ``,
  ].join('\n')
  // A partial run (BENCH_CASES) or a traced one (BENCH_OTEL) only prints: bench/results.md always
  // holds a full run of the service as deployed by default (tracing off). Analysis: docs/performance.md.
  if (!ONLY && !process.env.BENCH_OTEL && !BASELINE)
    writeFileSync(RESULTS, `${table}\nAnalysis: docs/performance.md.\n`)
  console.log(`\n${table}`)
} finally {
  await h.stopServers()
  await bench.drop()
}

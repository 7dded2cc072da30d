// `make bench`: the service against a bare Fastify + postgres.js "ceiling" doing only the SQL
// each route needs, interleaved in one run on a fresh database. Servers run on core 0, this
// driver (autocannon) on core 1 (the Makefile pins it). Absolute numbers on a shared machine
// drift by tens of percent between minutes, so every figure is a ratio to a reference measured
// right next to it: each run of the service is paired with a run of its reference (the order
// alternating), and the ratio reported is the median of the paired ratios.
import { writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import autocannon from 'autocannon'
import { projectRoot } from '../src/paths.js'
import { API_KEY as KEY, SERVER_CPU, createBenchDatabase, median, startServer, startService, stopServers } from './harness.js'
import { type BenchRequest, createBenchRequests, loadOptions } from './requests.js'

const DURATION = Number(process.env.BENCH_DURATION ?? 5)
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2)
const RUNS = Number(process.env.BENCH_RUNS ?? 5)
const CONNECTIONS = (process.env.BENCH_CONNECTIONS ?? '10,50').split(',').map(Number)
// Comma-separated case-name prefixes to run (all when unset), e.g. BENCH_CASES='GET user,POST user'.
const ONLY = process.env.BENCH_CASES?.split(',').map((x) => x.trim().toLowerCase())

interface Case {
  name: string
  /** The server measured: the service unless set. */
  on?: 'ceiling'
  /** What the case is measured against: the ceiling server doing the same SQL, or another case on the same server. */
  reference: 'ceiling' | { label: string; case: Case }
  /** events per request, for throughput in events/s */
  perRequest?: number
  request: () => BenchRequest
}

interface Measurement {
  rps: number
  p50: number
  p99: number
  bad: number
}

async function drive(base: string, c: Case, connections: number, duration = DURATION): Promise<Measurement> {
  const result = await autocannon(loadOptions(base, connections, duration, c.request))
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, bad: result.non2xx + result.errors }
}

const range = (xs: number[], digits = 0) => `${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`

// PostgreSQL shares the servers' core: a VACUUM during a run would land on whichever server
// happened to be measured, so no stand-in timer; the cases settle the database between them.
const bench = await createBenchDatabase('bench', { vacuumStandIn: false })
const sql = bench.sql

try {
  // BENCH_PROFILE: a folder for a V8 CPU profile of the service, written when it stops.
  const service = (await startService(bench.url, 3601, process.env.BENCH_PROFILE)).base
  const ceiling = (await startServer('ceiling', ['--import', 'tsx', 'bench/ceiling-server.ts'], 3602, { DATABASE_URL: bench.url })).base
  const requests = await createBenchRequests(sql, service)

  const getUser: Case = { name: 'GET user', reference: 'ceiling', request: requests.getUser }
  const cases: Case[] = [
    getUser,
    { name: 'POST user (new key)', reference: 'ceiling', request: requests.postNewUser },
    // The target is "a replay costs no more than a read": measured against GET user on the service.
    { name: 'POST user (replay)', reference: { label: 'GET user (service)', case: getUser }, request: requests.replayUser },
    // The same comparison on the bare stack (body parsed, one indexed read, no validation or
    // hash): how far a replay can be from a read before the service adds anything.
    {
      name: 'POST user (replay) on the ceiling',
      on: 'ceiling',
      reference: { label: 'GET user (ceiling)', case: getUser },
      request: requests.replayUserOnCeiling,
    },
    { name: 'PATCH user', reference: 'ceiling', request: requests.patchUser },
    { name: 'GET due list (50 rows)', reference: 'ceiling', request: () => requests.dueList(requests.dueListLearner) },
    { name: 'POST review', reference: 'ceiling', request: () => requests.review() },
    { name: 'telemetry batch (500 events)', reference: 'ceiling', perRequest: 500, request: requests.telemetryBatch },
  ]

  const rows: string[] = []
  const results: Record<string, { rps: number; ratio: number; p99Ratio: number }> = {}
  for (const c of cases) {
    if (ONLY && !ONLY.some((prefix) => c.name.toLowerCase().startsWith(prefix))) continue
    const base = c.on === 'ceiling' ? ceiling : service
    const [refBase, refCase, refLabel] = c.reference === 'ceiling' ? [ceiling, c, 'ceiling'] : [base, c.reference.case, c.reference.label]
    for (const connections of CONNECTIONS) {
      await bench.settle()
      // Warm both up (JIT, pools, caches), then measure in pairs, alternating which goes first.
      await drive(base, c, connections, WARMUP)
      await drive(refBase, refCase, connections, WARMUP)
      const pairs: { s: Measurement; r: Measurement }[] = []
      for (let run = 0; run < RUNS; run++) {
        if (run % 2 === 0) {
          const s = await drive(base, c, connections)
          pairs.push({ s, r: await drive(refBase, refCase, connections) })
        } else {
          const r = await drive(refBase, refCase, connections)
          pairs.push({ s: await drive(base, c, connections), r })
        }
      }
      const per = c.perRequest ?? 1
      const ratios = pairs.map((p) => p.s.rps / p.r.rps)
      const p99Ratios = pairs.map((p) => p.s.p99 / Math.max(p.r.p99, 1))
      const rps = median(pairs.map((p) => p.s.rps)) * per
      results[`${c.name}@${connections}`] = { rps, ratio: median(ratios), p99Ratio: median(p99Ratios) }
      const s = pairs.map((p) => p.s)
      const r = pairs.map((p) => p.r)
      rows.push(
        `| ${c.name} | ${connections} | ${Math.round(rps)} | ${refLabel} | ${Math.round(median(r.map((x) => x.rps)) * per)} | **${median(ratios).toFixed(2)}** (${range(ratios, 2)}) | ${median(s.map((x) => x.p50))} / ${median(s.map((x) => x.p99))} | ${median(r.map((x) => x.p50))} / ${median(r.map((x) => x.p99))} | ${s.reduce((a, x) => a + x.bad, 0)} |`,
      )
      console.log(rows.at(-1))
    }
  }

  // Telemetry metrics over exactly 1M events, in two shapes and two windows. "clustered" is how a
  // docs site emits them: a search and its clicks within seconds. "spread" gives each query id
  // events over the whole day: with the 12-hour window every query straddles an edge, the
  // rollup's worst case (its queries are recomputed from their events).
  const shapes = [
    {
      name: 'clustered: 250k searches, each a query and 3 clicks within 21 s, over the last day',
      insert: (now: number) => sql`
        insert into docs_search_events (event, emitted_at_ms, query_id, results_count, time_to_success_ms)
        select case when k = 0 then 'search_query' else 'search_result_click' end, ${now}::bigint - (q % 86400) * 1000 - 21000 + k * 7000,
               'q-' || q, case when k = 0 then q % 7 else 0 end, case when k = 1 then 1000 + q % 9000 else 0 end
        from generate_series(1, 250000) q, generate_series(0, 3) k`,
    },
    {
      name: 'spread: 50k query ids, each with 20 events over the whole day',
      insert: (now: number) => sql`
        insert into docs_search_events (event, emitted_at_ms, query_id, results_count, time_to_success_ms)
        select case when i % 3 = 0 then 'search_result_click' else 'search_query' end, ${now}::bigint - (i % 86400) * 1000,
               'q-' || (i % 50000), i % 7, case when i % 5 = 0 then 1000 + i % 9000 else 0 end
        from generate_series(1, 1000000) i`,
    },
  ]
  const metricsRows: { shape: string; window: number; timings: number[] }[] = []
  if (!ONLY || ONLY.some((prefix) => 'telemetry metrics'.startsWith(prefix))) {
    for (const shape of shapes) {
      await sql`truncate docs_search_events, docs_search_queries`
      await shape.insert(Date.now())
      await bench.settle()
      for (const window of [10080, 720]) {
        const metrics = () => fetch(`${service}/api/v1/telemetry/docs-search/metrics?window_minutes=${window}`, { headers: { 'x-api-key': KEY } })
        for (let i = 0; i < 2; i++) await (await metrics()).json() // warm-up: caches and plans
        const timings: number[] = []
        for (let i = 0; i < 9; i++) {
          const t0 = performance.now()
          const res = await metrics()
          if (res.status !== 200) throw new Error(`metrics answered ${res.status}`)
          await res.json()
          timings.push(performance.now() - t0)
        }
        metricsRows.push({ shape: shape.name, window, timings })
        console.log(`metrics, ${shape.name}, window ${window} min: ${median(timings).toFixed(0)} ms (${range(timings)})`)
      }
    }
  }

  const at = (name: string) => results[`${name}@50`]
  const fmt = (x: number | undefined, digits = 2) => (x === undefined || Number.isNaN(x) ? 'n/a' : x.toFixed(digits))
  const targets = [
    `GET user ≥ 0.75 of ceiling: ${fmt(at('GET user')?.ratio)}; p99 ≤ 2× ceiling: ${fmt(at('GET user')?.p99Ratio)}×`,
    `idempotent POST user ≥ 0.85 of ceiling: ${fmt(at('POST user (new key)')?.ratio)}`,
    `replayed POST ≥ GET user (ratio ≥ 1.00): ${fmt(at('POST user (replay)')?.ratio)} (on the bare-stack ceiling: ${fmt(at('POST user (replay) on the ceiling')?.ratio)})`,
    `telemetry batch ingest ≥ 20,000 events/s: ${fmt(at('telemetry batch (500 events)')?.rps, 0)}`,
    `telemetry metrics over 1M events ≤ 300 ms: ${metricsRows.length ? `${Math.max(...metricsRows.map((r) => median(r.timings))).toFixed(0)} ms, the slowest of the four medians below` : 'n/a'}`,
  ]
  const table = [
    `# Benchmark results`,
    ``,
    `${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, PostgreSQL on the same machine.`,
    `Servers ${bench.postgresPinned ? 'and PostgreSQL ' : ''}pinned to core ${SERVER_CPU}, autocannon on the other${bench.postgresPinned ? '' : ' (PostgreSQL could not be pinned)'}. Per case: ${WARMUP} s warm-up each, then ${RUNS} pairs of ${DURATION} s runs`,
    `(measured, reference; the order alternating). Ratio: median of the paired ratios (min–max); req/s and latencies: medians.`,
    ``,
    `| case | conns | req/s | reference | reference req/s | ratio | p50/p99 ms | reference p50/p99 ms | non-2xx |`,
    `|---|---|---|---|---|---|---|---|---|`,
    ...rows,
    ``,
    `Telemetry batch rows are events/s. Targets (50 connections):`,
    ``,
    ...targets.map((x) => `- ${x}`),
    ``,
    `Telemetry metrics over 1M events (9 requests each after 2 warm-ups; median and min–max):`,
    ``,
    `| events | window | median ms | min–max ms |`,
    `|---|---|---|---|`,
    ...metricsRows.map((r) => `| ${r.shape} | ${r.window} min | ${median(r.timings).toFixed(0)} | ${range(r.timings)} |`),
    ``,
  ].join('\n')
  // A partial run (BENCH_CASES) only prints: bench/results.md always holds a full run.
  if (!ONLY) writeFileSync(path.join(projectRoot, 'bench/results.md'), table)
  console.log(`\n${table}`)
} finally {
  await stopServers()
  await bench.drop()
}

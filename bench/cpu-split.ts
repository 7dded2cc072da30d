// `make bench-cpu`: CPU per request on the servers' core, the server's and PostgreSQL's apart,
// read from /proc (no profiler in the way). GET user and the replayed POST, in alternating rounds
// at 50 connections: the figures behind "a replay costs no more than a read". Both on the
// ceiling server too: what the service's cross-cutting work costs, and how a replay compares
// with a read on the bare stack. BENCH_CASES adds POST review (its round trips and statements),
// of a Leitner note and of an FSRS note (`POST review (fsrs note)`; the target is within 1.1× of
// the Leitner review). It also reports how busy each core was: below ~100 % on the servers' core,
// the load generator set the pace.
import autocannon from 'autocannon'
import {
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
  postgresCpuTicks,
  startCeiling,
  startService,
  stopServers,
} from './harness.js'
import { type BenchRequest, createBenchRequests, loadOptions } from './requests.js'
import { recordPrinted } from './results-file.js'

const ROUNDS = Number(process.env.BENCH_RUNS ?? 5)
const SECONDS = Number(process.env.BENCH_DURATION ?? 5)
// BENCH_SETUP: node-bound (default; PostgreSQL on the load generator's core, the server alone on
// its own) or shared (PostgreSQL on the servers' core).
const SETUP = (process.env.BENCH_SETUP ?? 'node-bound') as Setup

const bench = await createBenchDatabase('cpusplit', { vacuumStandIn: false })
try {
  bench.setup(SETUP)
  // BENCH_PROFILE: a folder for a V8 CPU profile of the service (bench/profile-summary.ts reads it).
  const service = await startService(bench.url, 3603, process.env.BENCH_PROFILE)
  // BENCH_PROFILE_CEILING: the same for the ceiling (the two profiles side by side).
  const ceilingProfile = process.env.BENCH_PROFILE_CEILING
    ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_CEILING}`]
    : []
  const ceiling = await startCeiling(bench.url, 3604, ceilingProfile)
  const requests = await createBenchRequests(bench.sql, service.base)
  const allCases: [string, Server, () => BenchRequest][] = [
    ['GET user', service, requests.getUser],
    ['POST user (replay)', service, requests.replayUser],
    ['POST review', service, () => requests.review()],
    ['POST review (fsrs note)', service, () => requests.review('remembered', 'fsrs')],
    ['GET user on the ceiling', ceiling, requests.getUser],
    ['POST user (replay) on the ceiling', ceiling, requests.replayUserOnCeiling],
    ['POST review on the ceiling', ceiling, () => requests.review()],
  ]
  // BENCH_CASES: comma-separated name prefixes (as in `make bench`); by default GET user and the replay.
  const wanted = (process.env.BENCH_CASES ?? 'GET user,POST user (replay)').split(',').map((c) => c.trim())
  const cases = allCases.filter(([name]) => wanted.some((w) => name.startsWith(w)))
  const figures = new Map(
    cases.map(([name]) => [
      name,
      {
        rps: [] as number[],
        server: [] as number[],
        postgres: [] as number[],
        serverCore: [] as number[],
        loadCore: [] as number[],
        bad: 0,
      },
    ]),
  )
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, server, next] of round % 2 ? [...cases].reverse() : cases) {
      await autocannon(loadOptions(server.base, 50, 1, next))
      const [s0, p0, c0, l0] = [
        cpuTicks(server.process.pid!),
        postgresCpuTicks(),
        coreTicks(SERVER_CPU),
        coreTicks(LOAD_CPU),
      ]
      const result = await autocannon(loadOptions(server.base, 50, SECONDS, next))
      const [s1, p1, c1, l1] = [
        cpuTicks(server.process.pid!),
        postgresCpuTicks(),
        coreTicks(SERVER_CPU),
        coreTicks(LOAD_CPU),
      ]
      const done = result.requests.total
      const f = figures.get(name)!
      f.rps.push(result.requests.average)
      f.server.push(((s1 - s0) * US_PER_TICK) / done)
      f.postgres.push(((p1 - p0) * US_PER_TICK) / done)
      f.serverCore.push(busyShare(c0, c1))
      f.loadCore.push(busyShare(l0, l1))
      f.bad += result.non2xx + result.errors
    }
  }
  const printed = recordPrinted(
    'cpu-split',
    'CPU per request, server and PostgreSQL apart (make bench-cpu)',
    'make bench-cpu',
  )
  console.log(
    `| case | req/s | server µs/request | PostgreSQL µs/request | sum | servers' core busy | load core busy | non-2xx |\n|---|---|---|---|---|---|---|---|`,
  )
  for (const [name, f] of figures) {
    const [s, p] = [median(f.server), median(f.postgres)]
    const pct = (xs: number[]) => `${(median(xs) * 100).toFixed(0)} %`
    console.log(
      `| ${name} | ${Math.round(median(f.rps))} | ${s.toFixed(1)} | ${p.toFixed(1)} | ${(s + p).toFixed(1)} | ${pct(f.serverCore)} | ${pct(f.loadCore)} | ${f.bad} |`,
    )
  }
  console.log(
    `(${SETUP} set-up; medians of ${ROUNDS} rounds of ${SECONDS} s; the load generator's own CPU is on the other core and not counted)`,
  )
  printed.write()
} finally {
  await stopServers()
  await bench.drop()
}

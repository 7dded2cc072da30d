// `make bench-otel`: what tracing costs, as the service's CPU per request (utime + stime from
// /proc, so other work on a shared machine moves it far less than it moves req/s). Built services
// on the servers' core, the same database: untraced, traced at each ratio of BENCH_OTEL_RATIOS
// (default 0.1 and 1; parent-based, OTLP/HTTP protobuf to a sink in this process that drops
// every export), and an untraced twin whose ratio shows the run's noise. GET user and POST user
// (new key), in alternating rounds. Throughput-equivalent: untraced µs / traced µs (1.00 =
// tracing is free).
import autocannon from 'autocannon'
import {
  SERVER_CPU,
  US_PER_TICK,
  type Server,
  busyShare,
  coreTicks,
  cpuTicks,
  createBenchDatabase,
  mainThreadTicks,
  median,
  startService,
  stopServers,
} from './harness.js'
import { type BenchRequest, createBenchRequests, loadOptions } from './requests.js'
import { recordPrinted } from './results-file.js'

const ROUNDS = Number(process.env.BENCH_RUNS ?? 5)
const SECONDS = Number(process.env.BENCH_DURATION ?? 4)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50)
const RATIOS = (process.env.BENCH_OTEL_RATIOS ?? '0.1,1').split(',').map((r) => r.trim())
// BENCH_OTEL_TOGETHER=1: the services share the core in the same seconds instead of taking turns.
const TOGETHER = process.env.BENCH_OTEL_TOGETHER === '1'

const bench = await createBenchDatabase('otelcpu', { vacuumStandIn: false })
try {
  bench.setup('node-bound')
  // BENCH_PROFILE: a folder for V8 CPU profiles, one subfolder per service (bench/profile-summary.ts reads them).
  const profile = (label: string) => process.env.BENCH_PROFILE && `${process.env.BENCH_PROFILE}/${label}`
  const services: [string, Server][] = [['untraced', await startService(bench.url, 3611, profile('untraced'), '')]]
  for (const [i, ratio] of RATIOS.entries())
    services.push([`${Number(ratio) * 100} %`, await startService(bench.url, 3612 + i, profile(ratio), ratio)])
  // A second untraced process of the same build: its ratio to the first is this run's noise
  // floor (two processes of one build can differ for their whole life, not only round by round).
  services.push(['untraced (twin)', await startService(bench.url, 3610, profile('untraced-twin'), '')])
  const requests = await createBenchRequests(bench.sql, services[0]![1].base)
  const cases: [string, () => BenchRequest][] = [
    ['GET user', requests.getUser],
    ['POST user (new key)', requests.postNewUser],
  ]
  // Per case and service: µs per request of each round, and the core's busy share.
  // `others`: µs per request outside the main thread (V8's compiler and GC threads): processes
  // of one build can differ there by 20 µs for a whole run, so it is shown apart.
  const figures = new Map<string, { us: number[]; others: number[]; busy: number[]; rps: number[]; bad: number }>()
  const key = (c: string, s: string) => `${c}\u0000${s}`
  for (const [c] of cases)
    for (const [s] of services) figures.set(key(c, s), { us: [], others: [], busy: [], rps: [], bad: 0 })

  /** Loads the services of `group` at once for a round and records each one's figures. */
  async function measure(caseName: string, next: () => BenchRequest, group: [string, Server][]) {
    await Promise.all(group.map(([, server]) => autocannon(loadOptions(server.base, CONNECTIONS, 1, next))))
    const c0 = coreTicks(SERVER_CPU)
    const s0 = group.map(([, server]) => cpuTicks(server.process.pid!))
    const m0 = group.map(([, server]) => mainThreadTicks(server.process.pid!))
    const results = await Promise.all(
      group.map(([, server]) => autocannon(loadOptions(server.base, CONNECTIONS, SECONDS, next))),
    )
    const s1 = group.map(([, server]) => cpuTicks(server.process.pid!))
    const m1 = group.map(([, server]) => mainThreadTicks(server.process.pid!))
    const busy = busyShare(c0, coreTicks(SERVER_CPU))
    for (const [i, [name]] of group.entries()) {
      const result = results[i]!
      const f = figures.get(key(caseName, name))!
      f.us.push(((s1[i]! - s0[i]!) * US_PER_TICK) / result.requests.total)
      f.others.push(((s1[i]! - s0[i]! - (m1[i]! - m0[i]!)) * US_PER_TICK) / result.requests.total)
      f.busy.push(busy)
      f.rps.push(result.requests.average)
      f.bad += result.non2xx + result.errors
    }
  }

  for (let round = 0; round < ROUNDS; round++) {
    for (const [caseName, next] of cases) {
      // Together: every service on the servers' core in the same seconds, so each round's host
      // noise (other tenants, frequency) falls on all of them. Else one after another, the
      // order reversed every other round.
      if (TOGETHER) await measure(caseName, next, services)
      else
        for (const service of round % 2 ? [...services].reverse() : services) await measure(caseName, next, [service])
      // New users pile up: the next round starts from the same table statistics.
      await bench.settle()
    }
  }

  const printed = recordPrinted('otel', 'What tracing costs: CPU per request (make bench-otel)', 'make bench-otel')
  console.log(
    `| case | service | req/s | server CPU µs/request | of which not the main thread | untraced µs / this µs | servers' core busy | non-2xx |\n|---|---|---|---|---|---|---|---|`,
  )
  for (const [caseName] of cases) {
    const base = figures.get(key(caseName, 'untraced'))!
    for (const [name] of services) {
      const f = figures.get(key(caseName, name))!
      // Paired by round: the rounds ran minutes apart on a machine whose load changes.
      const ratios = f.us.map((us, i) => base.us[i]! / us)
      const ratio =
        name === 'untraced'
          ? '1'
          : `**${median(ratios).toFixed(2)}** (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})`
      console.log(
        `| ${caseName} | ${name} | ${Math.round(median(f.rps))} | ${median(f.us).toFixed(0)} | ${median(f.others).toFixed(0)} | ${ratio} | ${(median(f.busy) * 100).toFixed(0)} % | ${f.bad} |`,
      )
    }
  }
  console.log(
    `(${CONNECTIONS} connections${TOGETHER ? ' to each service, all services loaded at once' : ''}; medians of ${ROUNDS} rounds of ${SECONDS} s; PostgreSQL and the load generator on the other core)`,
  )
  printed.write('Analysis and the sampling decision: docs/performance.md, "Tracing".')
} finally {
  await stopServers()
  await bench.drop()
}

// `make bench-scale`: the scale-out shape on one machine. GET user and POST user through HAProxy
// (deploy/haproxy.cfg) with 1, 2 and 3 replicas sharing one PostgreSQL database and one private
// Redis; then the cost of the Redis round trip: GET user on a replica with REDIS_URL against one
// with the in-memory store, many short paired runs alternating in one run, driven by wrk
// (median of the ratios). The replicas run on BENCH_SERVER_CPU (core 0 unless set, as in
// `make bench`); HAProxy, Redis, PostgreSQL and the load generator (autocannon; wrk for the
// Redis comparison) on the other core (the Makefile pins this driver, whose children inherit
// it; PostgreSQL is moved there), as they would run on other hosts in production. More
// replicas on the same core cannot add capacity: the figures say what a second and third process
// cost or gain here, not what they would on separate hosts. The Redis comparison also reads the
// replica's own CPU per request from /proc, which the load generator's pace does not move.
// Writes bench/scale.md.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import autocannon from 'autocannon'
import { Redis } from 'ioredis'
import { projectRoot } from '../src/paths.js'
import { haproxyEnv, HAPROXY_CONFIG } from '../test/helpers/private-haproxy.js'
import { freePort } from '../test/helpers/server-process.js'
import {
  API_KEY,
  LOAD_CPU,
  SERVER_CPU,
  US_PER_TICK,
  busyShare,
  coreTicks,
  cpuTicks,
  createBenchDatabase,
  median,
  startServer,
  stopServers,
} from './harness.js'
import { type BenchRequest, createBenchRequests, loadOptions } from './requests.js'
import { runWrk } from './wrk.js'
import { resultsHeader } from './results-file.js'

const DURATION = Number(process.env.BENCH_DURATION ?? 5)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20)
// The Redis comparison asks what the round trip costs a replica's capacity, so it loads the
// replica until its core is the bottleneck, with make bench's 50 connections; at 20 the closed
// loop mostly measures the round trip's latency instead.
const COMPARE_CONNECTIONS = Number(process.env.BENCH_COMPARE_CONNECTIONS ?? 50)
// The comparison's paired runs: short and many, alternating, because this shared VM's speed moves
// from one run to the next by more than the difference measured (two runs of one server, 5 s
// each, read 51 and 75 µs of CPU per request); many short pairs see the same drift on both sides.
const RUNS = Number(process.env.BENCH_RUNS ?? 12)
const COMPARE_DURATION = Number(process.env.BENCH_COMPARE_DURATION ?? 2)
// BENCH_REPLICAS='' skips the balancer table (only the Redis comparison runs).
const REPLICA_COUNTS = (process.env.BENCH_REPLICAS ?? '1,2,3').split(',').filter(Boolean).map(Number)

interface Measurement {
  rps: number
  p50: number
  p99: number
  bad: number
  total: number
}

async function drive(
  base: string,
  request: () => BenchRequest,
  duration = DURATION,
  connections = CONNECTIONS,
): Promise<Measurement> {
  const result = await autocannon(loadOptions(base, connections, duration, request))
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    bad: result.non2xx + result.errors,
    total: result.requests.total,
  }
}

/**
 * The comparison's load: wrk, not autocannon. On this machine the generator shares its core with
 * Redis and PostgreSQL; autocannon alone kept that core about 90 % busy, so both stores were
 * held to what that core could send and the ratio measured it, not the replica. wrk costs a
 * fraction per request, and the replica's core is then the bottleneck, as the comparison means.
 */
function driveWithWrk(base: string, request: () => BenchRequest, duration = COMPARE_DURATION): Promise<Measurement> {
  return runWrk(base, COMPARE_CONNECTIONS, duration, Array.from({ length: 1000 }, request))
}

/** Redis' own CPU seconds so far (user + system), from INFO. */
async function redisCpuSeconds(redis: Redis): Promise<number> {
  const info = await redis.info('cpu')
  const read = (field: string) => Number(new RegExp(`^${field}:([\\d.]+)`, 'm').exec(info)![1])
  return read('used_cpu_user') + read('used_cpu_sys')
}

/**
 * A run with the server's CPU per answered request (µs, from /proc: 10 ms ticks), Redis' CPU per
 * request (its decisions), and how busy the load generator's core was (Redis shares it).
 */
async function driveWithCpu(
  base: string,
  pid: number,
  request: () => BenchRequest,
  redis: Redis,
): Promise<Measurement & { cpuUs: number; redisUs: number; loadCoreBusy: number }> {
  const [before, redisBefore, loadBefore] = [cpuTicks(pid), await redisCpuSeconds(redis), coreTicks(LOAD_CPU)]
  const run = await driveWithWrk(base, request)
  const [after, redisAfter, loadAfter] = [cpuTicks(pid), await redisCpuSeconds(redis), coreTicks(LOAD_CPU)]
  const per = (x: number) => x / Math.max(1, run.total)
  return {
    ...run,
    cpuUs: per((after - before) * US_PER_TICK),
    redisUs: per((redisAfter - redisBefore) * 1e6),
    loadCoreBusy: busyShare(loadBefore, loadAfter),
  }
}

const helpers: ChildProcess[] = []
function spawnHelper(command: string, args: string[], env: Record<string, string> = {}): ChildProcess {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'inherit'] })
  helpers.push(child)
  return child
}
async function stopHelper(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((r) => child.once('exit', r))
  child.kill('SIGTERM')
  await exited
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      if (await check()) return
    } catch {}
    await sleep(100)
  }
  throw new Error(`${what} did not come up`)
}

const bench = await createBenchDatabase('bench_scale', { vacuumStandIn: false })
const redisPort = await freePort()
const redisDir = mkdtempSync(path.join(os.tmpdir(), 'bench-redis-'))
bench.setup('node-bound') // PostgreSQL on the load generator's core, the replicas' core alone
spawnHelper('taskset', [
  '-c',
  LOAD_CPU,
  'redis-server',
  '--port',
  String(redisPort),
  '--bind',
  '127.0.0.1',
  '--save',
  '',
  '--appendonly',
  'no',
  '--dir',
  redisDir,
])
const lines: string[] = []

try {
  const env = (redisUrl: string | null): Record<string, string> => ({
    DATABASE_URL: bench.url,
    API_KEYS: API_KEY,
    RATE_LIMIT_MAX: '10000000',
    RATE_LIMIT_WINDOW_MS: '10000',
    LOG_LEVEL: 'warn',
    SHUTDOWN_DRAIN_MS: '0',
    ...(redisUrl ? { REDIS_URL: redisUrl } : {}),
  })
  const redisUrl = `redis://127.0.0.1:${redisPort}`
  const ports = await Promise.all([freePort(), freePort(), freePort(), freePort()])
  // One at a time: four servers loading at once on one core outlast Fastify's plugin timeout.
  const replicas = []
  for (const port of ports.slice(0, 3))
    replicas.push(await startServer('replica', ['dist/src/server.js'], port, env(redisUrl)))
  const inMemory = await startServer('in-memory', ['dist/src/server.js'], ports[3]!, env(null))
  const requests = await createBenchRequests(bench.sql, replicas[0]!.base)

  const table: string[] = [
    '| replicas | GET user req/s | p50 / p99 ms | POST user req/s | p50 / p99 ms | non-2xx + errors |',
    '|---:|---:|---:|---:|---:|---:|',
  ]
  for (const count of REPLICA_COUNTS) {
    const haproxyPort = await freePort()
    const haproxy = spawnHelper(
      'haproxy',
      ['-db', '-f', HAPROXY_CONFIG],
      haproxyEnv(
        `127.0.0.1:${haproxyPort}`,
        replicas.slice(0, count).map((r) => r.base.replace('http://', '')),
        500,
      ),
    )
    const base = `http://127.0.0.1:${haproxyPort}`
    await until(async () => (await fetch(`${base}/ready`)).ok, 'haproxy')
    await sleep(1500) // the absent replicas fail their checks and leave the rotation
    await drive(base, requests.getUser, 2) // warm-up
    const get = await drive(base, requests.getUser)
    const post = await drive(base, requests.postNewUser)
    await stopHelper(haproxy)
    await bench.settle()
    table.push(
      `| ${count} | ${get.rps.toFixed(0)} | ${get.p50} / ${get.p99} | ${post.rps.toFixed(0)} | ${post.p50} / ${post.p99} | ${get.bad + post.bad} |`,
    )
    console.log(table.at(-1))
  }

  // The Redis round trip: a replica with REDIS_URL against the in-memory store, directly (no HAProxy).
  const withRedis = replicas[0]!
  await driveWithWrk(withRedis.base, requests.getUser, 5)
  await driveWithWrk(inMemory.base, requests.getUser, 5) // both warmed alike (the JIT)
  const ratios: number[] = []
  const redisRps: number[] = []
  const memoryRps: number[] = []
  const redisCpu: number[] = []
  const memoryCpu: number[] = []
  const redisOwnCpu: number[] = []
  const loadBusy = { redis: [] as number[], memory: [] as number[] }
  const redisInfo = new Redis(redisUrl)
  for (let run = 0; run < RUNS; run++) {
    // Alternate the order so that drift of the shared machine lands on both sides.
    const order = run % 2 === 0 ? [withRedis, inMemory] : [inMemory, withRedis]
    const first = await driveWithCpu(order[0]!.base, order[0]!.process.pid!, requests.getUser, redisInfo)
    const second = await driveWithCpu(order[1]!.base, order[1]!.process.pid!, requests.getUser, redisInfo)
    const [r, m] = order[0] === withRedis ? [first, second] : [second, first]
    redisRps.push(r.rps)
    memoryRps.push(m.rps)
    redisCpu.push(r.cpuUs)
    memoryCpu.push(m.cpuUs)
    redisOwnCpu.push(r.redisUs)
    loadBusy.redis.push(r.loadCoreBusy)
    loadBusy.memory.push(m.loadCoreBusy)
    ratios.push(r.rps / m.rps)
    console.log(
      `run ${run + 1}: Redis ${r.rps.toFixed(0)} req/s (${r.cpuUs.toFixed(0)} µs CPU), in memory ${m.rps.toFixed(0)} req/s (${m.cpuUs.toFixed(0)} µs CPU), ratio ${(r.rps / m.rps).toFixed(3)}`,
    )
  }
  redisInfo.disconnect()
  const ratio = median(ratios)
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0)
  const meanRatio = sum(redisRps) / sum(memoryRps)
  const percent = (xs: number[]) => `${(median(xs) * 100).toFixed(0)} %`
  const cpuRatio = median(memoryCpu.map((m, i) => m / redisCpu[i]!))

  lines.push(
    ...resultsHeader('Replicas behind HAProxy, and the rate-limit store (make bench-scale)', 'make bench-scale'),
    `autocannon ${CONNECTIONS} connections, ${DURATION} s per case, from the same machine.`,
    '',
    '## Through HAProxy with 1, 2 and 3 replicas (Redis rate-limit store, one PostgreSQL database)',
    '',
    ...table,
    '',
    `The replicas run on core ${SERVER_CPU} (BENCH_SERVER_CPU); HAProxy, Redis, PostgreSQL and the`,
    `load generator on core ${LOAD_CPU}, as other hosts would hold them. More replicas on the same core add no capacity:`,
    'the table shows what HAProxy and more processes cost or gain on one small machine, not',
    'scale-out on separate hosts.',
    '',
    '## The Redis round trip: GET user with the Redis store vs the in-memory store',
    '',
    `One replica on core ${SERVER_CPU} alone, directly (no HAProxy), ${COMPARE_CONNECTIONS} connections from wrk (its core the bottleneck); Redis, PostgreSQL and wrk on core ${LOAD_CPU}.`,
    '',
    '| store | GET user req/s (runs) | replica CPU µs per request (runs) |',
    '|---|---|---|',
    `| Redis | ${redisRps.map((x) => x.toFixed(0)).join(', ')} | ${redisCpu.map((x) => x.toFixed(0)).join(', ')} |`,
    `| in memory | ${memoryRps.map((x) => x.toFixed(0)).join(', ')} | ${memoryCpu.map((x) => x.toFixed(0)).join(', ')} |`,
    '',
    `Median ratio Redis / in memory over ${RUNS} paired runs of ${COMPARE_DURATION} s (order alternating): **${ratio.toFixed(3)}** in req/s (target >= 0.85;`,
    `${meanRatio.toFixed(3)} as the ratio of their mean req/s); **${cpuRatio.toFixed(3)}** in requests per replica CPU second (in-memory µs / Redis µs per request).`,
    '',
    `Redis' own CPU per decision (INFO, user + system): ${redisOwnCpu.map((x) => x.toFixed(1)).join(', ')} µs, median ${median(redisOwnCpu).toFixed(1)};`,
    `at that cost one Redis core judges about ${Math.round(1e6 / median(redisOwnCpu))} requests/s for all replicas together.`,
    `The load generator's core was busy ${percent(loadBusy.redis)} with Redis, ${percent(loadBusy.memory)} with the in-memory store (median):`,
    'Redis works on that core here, so in req/s the Redis store also pays for its own decisions there.',
    '',
  )
  writeFileSync(path.join(projectRoot, 'bench', 'scale.md'), lines.join('\n'))
  console.log(lines.join('\n'))
} finally {
  await stopServers()
  for (const child of helpers) await stopHelper(child)
  await bench.drop()
}
process.exit(0)

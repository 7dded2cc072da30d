// `make bench-stages`: the server CPU per request of each stage of the request pipeline, for
// GET user, a replayed POST and a new POST, on the service and the bare-stack ceiling
// (bench/stages.md).
//
// Method: each server runs under V8's sampling profiler (--cpu-prof). The driver sends a fixed
// number of requests per case (after a warm-up of the same requests) and notes the monotonic
// clock around them; V8 stamps its samples with the same clock, so each case's samples are
// those inside its window. A sample is given to the stage that owns the innermost frame of its
// stack that is project or library code (Node's own frames are passed over: a `writev` under
// postgres.js is SQL, one under Fastify's reply is the write; a SHA-256 under src/auth is auth,
// one under src/idempotency is idempotency). A stage's µs per request is its sampled time in
// the window over the requests in it; the median of the rounds is reported. The same window's
// process CPU from /proc (all threads: GC and compiler threads too) stands beside it.
//
// Limits: sampling (BENCH_PROFILE_INTERVAL µs, default 250) costs a few per cent of CPU and
// gives a stage of a few µs a wide error; code V8 inlined is attributed by its inlining
// information, usually but not always right; garbage collection and the promise machinery are
// shared costs that no stage owns, and code compiled with `new Function` (fast-json-stringify's
// serializers) has no file, so it is given to its caller.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import autocannon from 'autocannon'
import { projectRoot } from '../src/paths.js'
import {
  LOAD_CPU,
  SERVER_CPU,
  US_PER_TICK,
  type Server,
  cpuTicks,
  createBenchDatabase,
  median,
  startCeiling,
  startService,
  stopServers,
} from './harness.js'
import { type BenchRequest, createBenchRequests, loadOptions } from './requests.js'

const ROUNDS = Number(process.env.BENCH_RUNS ?? 3)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50)
const INTERVAL_US = Number(process.env.BENCH_PROFILE_INTERVAL ?? 250)
/** Requests measured per case and round (warm-up: a quarter as many more); writes are slower, so fewer. */
const READS = Number(process.env.BENCH_REQUESTS ?? 20_000)
const WRITES = Math.round(READS / 3)
const RESULTS = path.join(projectRoot, 'bench/stages.md')
/**
 * BENCH_BASELINE: another checkout of the service, built (e.g. a worktree of main with `npm run
 * build`): it runs as a third server in the same rounds, so a change is measured against the
 * code before it under the same conditions. The table then also has its column.
 */
const BASELINE = process.env.BENCH_BASELINE ? path.resolve(process.env.BENCH_BASELINE, 'dist/src/server.js') : null
/** BENCH_STAGES_DETAIL=N: also print each window's top N functions (self time) per stage, to see inside one. */
const DETAIL = Number(process.env.BENCH_STAGES_DETAIL ?? 0)

/** Stages in table order. Each pattern is tried against `functionName url` of a frame. */
const STAGES: [string, RegExp][] = [
  ['request id', /\/plugins\/app\/request-id\./],
  ['auth (API key, scope, systems)', /\/src\/auth\/|\/plugins\/app\/auth\./],
  ['rate limit (and its headers)', /@fastify\/rate-limit|\/src\/rate-limit\/|\/plugins\/external\/rate-limit\./],
  [
    'fairness (load shedding, body budget)',
    /@fastify\/under-pressure|\/plugins\/external\/load-shedding\.|body-budget\.|\/plugins\/app\/request-pipeline\./,
  ],
  ['CORS', /@fastify\/cors|\/plugins\/external\/cors\./],
  [
    'body parsing (JSON)',
    /secure-json-parse|\/plugins\/app\/json-body\.|\/plugins\/app\/json-only-bodies\.|body-prescan|\/validation\/json-text\.|fastify\/lib\/content-?[tT]ype-?[pP]arser/,
  ],
  ['validation (Ajv)', /node_modules\/ajv|\/src\/validation\/|generated\/validators|fastify\/lib\/validation\./],
  ['idempotency (hash, replay)', /\/src\/idempotency\/|safe-stable-stringify/],
  ['handler', /\/handlers\/|\/src\/schedule\/|bench\/ceiling-server\./],
  [
    'SQL (postgres.js, repositories)',
    /node_modules\/postgres\/|\/src\/repositories\/|\/src\/db\/|\/plugins\/app\/database\./,
  ],
  ['metrics', /prom-client|fastify-metrics|\/plugins\/external\/metrics\.|tdigest|bintrees/],
  ['logging', /node_modules\/pino|\/plugins\/app\/request-log\.|fastify\/lib\/logger/],
  ['errors', /\/plugins\/app\/error-handler\.|\/src\/errors\.|fastify\/lib\/error-/],
  ['serialisation', /fast-json-stringify|^(serialize|preSerializationHook\w*) .*fastify\/lib\/reply\./],
  ['headers and write', /fastify\/lib\/reply\./],
  [
    'Fastify (routing, hooks, request and reply objects)',
    /node_modules\/(fastify|find-my-way|avvio|fastify-plugin|@fastify\/[\w-]+)\/|\/src\/route-template\.|\/plugins\/app\/(early-close|contract-states|telemetry-lifecycle)\./,
  ],
]
/** Samples with no project or library frame: by their leaf. */
const UNOWNED: [string, RegExp][] = [
  ['garbage collection', /^\(garbage collector\)/],
  [
    'Node HTTP and sockets (parse, read, write)',
    /node:_http|node:net|node:internal\/stream|node:stream|^(writev|writeBuffer|writeUtf8String|writeLatin1String|execute) /,
  ],
  [
    'promises, timers and the event loop',
    /^\(program\)|^runMicrotasks|task_queues|internal\/timers|processTicksAndRejections/,
  ],
]
const OTHER = 'other'
const ROW_ORDER = [...STAGES.map(([s]) => s), ...UNOWNED.map(([s]) => s), OTHER]

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string }
  children?: number[]
}
interface Profile {
  nodes: ProfileNode[]
  startTime: number
  samples: number[]
  timeDeltas: number[]
}

/** The stage of each profile node (by its stack), memoised. */
function stageOf(profile: Profile): (id: number) => string | null {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const memo = new Map<number, string | null>()
  const label = (n: ProfileNode) => `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url}`
  return (leaf) => {
    if (memo.has(leaf)) return memo.get(leaf)!
    const leafLabel = label(byId.get(leaf)!)
    let stage: string | null = null
    if (/^\(idle\)/.test(leafLabel)) stage = null
    else {
      for (let id: number | undefined = leaf; id !== undefined && stage === null; id = parent.get(id)) {
        const frame = label(byId.get(id)!)
        stage = STAGES.find(([, p]) => p.test(frame))?.[0] ?? null
      }
      stage ??= UNOWNED.find(([, p]) => p.test(leafLabel))?.[0] ?? OTHER
    }
    memo.set(leaf, stage)
    return stage
  }
}

interface Window {
  caseName: string
  target: 'service' | 'baseline' | 'ceiling'
  from: number
  to: number
  requests: number
  /** Process CPU over the window, µs (all threads, from /proc). */
  processCpu: number
}

/** µs per request of each stage within each window of one profile. */
function attribute(profile: Profile, windows: Window[]): Map<Window, Map<string, number>> {
  const stage = stageOf(profile)
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const detail = new Map<Window, Map<string, number>>()
  const out = new Map(windows.map((w) => [w, new Map<string, number>()]))
  let t = profile.startTime
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0
    const w = windows.find((x) => t >= x.from && t <= x.to)
    if (!w) continue
    const s = stage(profile.samples[i]!)
    if (s === null) continue
    const m = out.get(w)!
    const us = (profile.timeDeltas[i + 1] ?? 0) / w.requests
    m.set(s, (m.get(s) ?? 0) + us)
    if (DETAIL > 0) {
      const { functionName, url } = byId.get(profile.samples[i]!)!.callFrame
      const key = `${s}\t${functionName || '(anonymous)'} ${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/dist\//, '')}`
      const d = detail.get(w) ?? new Map<string, number>()
      detail.set(w, d)
      d.set(key, (d.get(key) ?? 0) + us)
    }
  }
  for (const [w, d] of detail) {
    console.log(`\n${w.target} ${w.caseName}:`)
    const byStage = new Map<string, [string, number][]>()
    for (const [key, us] of d) {
      const [st, fn] = key.split('\t') as [string, string]
      byStage.set(st, [...(byStage.get(st) ?? []), [fn, us]])
    }
    for (const [st, fns] of byStage) {
      console.log(`  ${st}`)
      for (const [fn, us] of fns.sort((a, b) => b[1] - a[1]).slice(0, DETAIL))
        console.log(`    ${us.toFixed(2).padStart(7)}  ${fn}`)
    }
  }
  return out
}

/** The main thread's profile in a folder (a loader such as tsx adds a worker thread's). */
function readProfile(dir: string): Profile {
  const file = readdirSync(dir).find((f) => /\.\d+\.0\.\d+\.cpuprofile$/.test(f))
  if (!file) throw new Error(`no main-thread profile in ${dir}`)
  return JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as Profile
}

const monotonicMicros = () => Number(process.hrtime.bigint() / 1000n)

async function measure(
  server: Server,
  target: Window['target'],
  caseName: string,
  next: () => BenchRequest,
  amount: number,
): Promise<Window> {
  const run = async (n: number) => {
    const result = await autocannon({ ...loadOptions(server.base, CONNECTIONS, 0, next), amount: n })
    if (result.non2xx + result.errors > 0)
      throw new Error(`${target} ${caseName}: ${result.non2xx} non-2xx, ${result.errors} errors`)
    return result.requests.total
  }
  await run(Math.round(amount / 4))
  const [ticks0, from] = [cpuTicks(server.process.pid!), monotonicMicros()]
  const requests = await run(amount)
  const [to, ticks1] = [monotonicMicros(), cpuTicks(server.process.pid!)]
  return { caseName, target, from, to, requests, processCpu: ((ticks1 - ticks0) * US_PER_TICK) / requests }
}

const bench = await createBenchDatabase('stages', { vacuumStandIn: false })
const loadBefore = os.loadavg()
const started = new Date()
// figures[case][target][stage] = one value per round
const figures = new Map<string, Map<string, Map<string, number[]>>>()
const put = (caseName: string, target: string, stage: string, value: number) => {
  const byTarget = figures.get(caseName) ?? new Map<string, Map<string, number[]>>()
  figures.set(caseName, byTarget)
  const byStage = byTarget.get(target) ?? new Map<string, number[]>()
  byTarget.set(target, byStage)
  byStage.set(stage, [...(byStage.get(stage) ?? []), value])
}
let requests: Awaited<ReturnType<typeof createBenchRequests>> | undefined
/** BENCH_CASES=a,b: only the cases whose names start with these (printed, bench/stages.md left as it is). */
const ONLY = process.env.BENCH_CASES?.split(',').map((x) => x.trim().toLowerCase())
const ALL_CASES = [
  'GET user',
  'POST user (replay)',
  'POST user (new key)',
  'PATCH user',
  'POST review',
  'GET due list (50 rows)',
  'telemetry batch (500 events)',
]
const CASES = ALL_CASES.filter((c) => !ONLY || ONLY.some((prefix) => c.toLowerCase().startsWith(prefix)))
try {
  bench.setup('node-bound')
  for (let round = 0; round < ROUNDS; round++) {
    await bench.settle()
    const profileArgs = (dir: string) => ['--cpu-prof', `--cpu-prof-dir=${dir}`, `--cpu-prof-interval=${INTERVAL_US}`]
    const serviceDir = mkdtempSync(path.join(os.tmpdir(), 'stages-service-'))
    const ceilingDir = mkdtempSync(path.join(os.tmpdir(), 'stages-ceiling-'))
    const baselineDir = mkdtempSync(path.join(os.tmpdir(), 'stages-baseline-'))
    const profiled = await startServiceProfiled(bench.url, 3605, profileArgs(serviceDir))
    const baseline = BASELINE ? await startServiceProfiled(bench.url, 3607, profileArgs(baselineDir), BASELINE) : null
    const ceiling = await startCeiling(bench.url, 3606, profileArgs(ceilingDir))
    // Once: it stores the answer the replays ask for (the ports stay the same between rounds).
    requests ??= await createBenchRequests(bench.sql, profiled.base)
    const windows: Window[] = []
    const plan: [string, () => BenchRequest, () => BenchRequest, number][] = [
      ['GET user', requests.getUser, requests.getUser, READS],
      ['POST user (replay)', requests.replayUser, requests.replayUserOnCeiling, READS],
      ['POST user (new key)', requests.postNewUser, requests.postNewUser, WRITES],
      ['PATCH user', requests.patchUser, requests.patchUser, WRITES],
      ['POST review', () => requests!.review(), () => requests!.review(), WRITES],
      ['GET due list (50 rows)', () => requests!.dueList(), () => requests!.dueList(), WRITES],
      // µs per batch of 500 events; fewer requests, as each is 500 events' work.
      ['telemetry batch (500 events)', requests.telemetryBatch, requests.telemetryBatch, Math.round(READS / 100)],
    ]
    const planned = plan.filter(([name]) => CASES.includes(name))
    for (const [name, onService, onCeiling, amount] of round % 2 ? [...planned].reverse() : planned) {
      const pair: [Server, Window['target'], () => BenchRequest][] = [
        [profiled, 'service', onService],
        ...(baseline ? [[baseline, 'baseline', onService] as [Server, Window['target'], () => BenchRequest]] : []),
        [ceiling, 'ceiling', onCeiling],
      ]
      for (const [server, target, next] of round % 2 ? pair.reverse() : pair)
        windows.push(await measure(server, target, name, next, amount))
    }
    await stopServers()
    const profiles: [string, Window['target']][] = [
      [serviceDir, 'service'],
      [ceilingDir, 'ceiling'],
    ]
    if (baseline) profiles.push([baselineDir, 'baseline'])
    for (const [dir, target] of profiles) {
      const mine = windows.filter((w) => w.target === target)
      for (const [w, stages] of attribute(readProfile(dir), mine)) {
        let sampled = 0
        for (const stage of ROW_ORDER) {
          const us = stages.get(stage) ?? 0
          sampled += us
          put(w.caseName, target, stage, us)
        }
        put(w.caseName, target, 'main thread, sampled', sampled)
        put(w.caseName, target, 'process CPU (/proc, all threads)', w.processCpu)
      }
      rmSync(dir, { recursive: true, force: true })
    }
    rmSync(baselineDir, { recursive: true, force: true })
    console.log(`round ${round + 1} of ${ROUNDS} done`)
  }
} finally {
  await stopServers()
  await bench.drop()
}

/** The service as startService starts it, with extra Node flags (the profiler's) before the entry point. */
async function startServiceProfiled(url: string, port: number, nodeArgs: string[], entry?: string): Promise<Server> {
  const saved = process.env.BENCH_NODE_OPTIONS
  process.env.BENCH_NODE_OPTIONS = [saved ?? '', ...nodeArgs].join(' ')
  try {
    return await startService(url, port, undefined, '', entry)
  } finally {
    if (saved === undefined) delete process.env.BENCH_NODE_OPTIONS
    else process.env.BENCH_NODE_OPTIONS = saved
  }
}

const cell = (caseName: string, target: string, stage: string) => {
  const xs = figures.get(caseName)?.get(target)?.get(stage)
  return xs && xs.length > 0 ? median(xs).toFixed(1) : 'n/a'
}
const targets = BASELINE ? ['service', 'baseline', 'ceiling'] : ['service', 'ceiling']
const header = CASES.flatMap((c) => targets.map((t, i) => (i === 0 ? `${c}: ${t}` : t)))
const rows = [...ROW_ORDER, 'main thread, sampled', 'process CPU (/proc, all threads)'].map((stage) => {
  const cells = CASES.flatMap((c) => targets.map((t) => cell(c, t, stage)))
  const bold = stage.startsWith('main') || stage.startsWith('process')
  return `| ${bold ? `**${stage}**` : stage} | ${cells.join(' | ')} |`
})
function commitOf(dir: string): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: dir, encoding: 'utf8' }).trim()
  } catch {
    return 'unknown'
  }
}
const commit = (() => {
  try {
    const sha = commitOf(projectRoot)
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'handlers', 'generated'], {
      cwd: projectRoot,
      encoding: 'utf8',
    }).trim()
    return dirty ? `${sha} (with uncommitted changes)` : sha
  } catch {
    return 'unknown'
  }
})()
const loadAfter = os.loadavg()
const text = [
  `# CPU per request by stage of the request pipeline`,
  ``,
  `${started.toISOString().slice(0, 16).replace('T', ' ')} UTC, commit ${commit}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, Node ${process.version},`,
  `PostgreSQL 15 on the same machine. Command: \`make bench-stages\` (BENCH_RUNS=${ROUNDS}, BENCH_REQUESTS=${READS}, BENCH_CONNECTIONS=${CONNECTIONS}, BENCH_PROFILE_INTERVAL=${INTERVAL_US}).`,
  `Load average before / after: ${loadBefore.map((x) => x.toFixed(1)).join(' ')} / ${loadAfter.map((x) => x.toFixed(1)).join(' ')} (the host may be shared: CPU per request moves far less with other work than throughput does, but a busy host still adds cache and scheduling costs).`,
  ``,
  `Servers on core ${SERVER_CPU}, autocannon and PostgreSQL on core ${LOAD_CPU} (the node-bound set-up of \`make bench\`), ${CONNECTIONS} connections.`,
  ...(BASELINE
    ? [
        `Baseline: the build at ${path.dirname(path.dirname(path.dirname(BASELINE)))} (commit ${commitOf(path.dirname(path.dirname(path.dirname(BASELINE))))}), run in the same rounds.`,
      ]
    : []),
  `Per round: the servers started afresh under V8's sampling profiler; per case ${READS} requests (the writes and the due list ${WRITES}, the telemetry batch ${Math.round(READS / 100)}) after a warm-up of a quarter as many,`,
  `service and ceiling in turn (the order alternating between rounds). µs of CPU per request, medians of ${ROUNDS} rounds. A sample belongs to the stage`,
  `that owns the innermost project or library frame of its stack (Node's own frames are passed over: a socket write under postgres.js is SQL, one under`,
  `Fastify's reply is the write); samples without one are grouped by their leaf. The ceiling (bench/ceiling-server.ts) is bare Fastify + postgres.js`,
  `doing the same SQL; its replay route reads the stored answer and sends it. Limits: sampling costs a few per cent and leaves stages of a few µs with a`,
  `wide error (compare rounds, not single digits); inlined code is placed by V8's inlining information; serializers compiled with \`new Function\` are`,
  `given to their caller; GC and the promise machinery belong to no stage. "main thread, sampled" is the sum of the rows; the process CPU counts`,
  `every thread (GC and compiler threads too) and the profiler's own cost. The telemetry batch's figures are per batch of 500 events.`,
  ``,
  `| stage | ${header.join(' | ')} |`,
  `|---|${header.map(() => '---').join('|')}|`,
  ...rows,
  ``,
].join('\n')
if (!ONLY) writeFileSync(RESULTS, text)
console.log(text)

// `make bench-instructions`: instructions per request of the service, the bare-stack ceiling and
// (BENCH_BASELINE) another build, for the benchmarked cases. valgrind's callgrind counts them:
// unlike CPU time, a count does not move when other work shares the machine, so a change to the
// pipeline can be weighed on a busy host. It counts user-space instructions only: the kernel's
// share of a request (socket reads and writes) and cache misses are not in it, so `make bench`
// stays the measure of the floors; this one shows what a change saves.
//
// Each server runs under callgrind on one bench database; per case: a warm-up with counting off
// (the JIT's tiers, the pool's connections), counting on for a short run (valgrind translating
// the code again), counters zeroed, BENCH_REQUESTS requests, the count dumped.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import autocannon from 'autocannon'
import { projectRoot } from '../src/paths.js'
import { legacyKeyId } from '../src/auth/api-keys.js'
import { API_KEY, createBenchDatabase } from './harness.js'
import { type BenchRequest, createBenchRequests, loadOptions } from './requests.js'
import { recordPrinted } from './results-file.js'
import { callgrindArgs } from './callgrind.js'

const N = Number(process.env.BENCH_REQUESTS ?? 1500)
/** Requests before counting: the JIT's tiers settle (under valgrind it compiles slowly). */
const WARMUP = Number(process.env.BENCH_WARMUP ?? 3000)
/** BENCH_CASES="PATCH user,POST review": only those. */
const ONLY = process.env.BENCH_CASES?.split(',').map((c) => c.trim())
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10)
/** BENCH_BASELINE: another checkout of the service, built (`npm run build`), counted beside this one. */
const BASELINE = process.env.BENCH_BASELINE ? path.resolve(process.env.BENCH_BASELINE) : null

type Target = 'service' | 'baseline' | 'ceiling'

function startUnderCallgrind(target: Target, dir: string, port: number, databaseUrl: string): ChildProcess {
  const entry: Record<Target, string[]> = {
    service: ['dist/src/server.js'],
    baseline: [path.join(BASELINE ?? '', 'dist/src/server.js')],
    ceiling: ['--import', 'tsx', 'bench/ceiling-server.ts'],
  }
  return spawn(
    'valgrind',
    [
      ...callgrindArgs(dir),
      // The main thread's count alone: the compiler's and the collector's helper threads run on
      // their own schedule, which under valgrind moves from run to run.
      '--separate-threads=yes',
      process.execPath,
      ...entry[target],
    ],
    {
      cwd: target === 'baseline' ? BASELINE! : projectRoot,
      env: {
        ...process.env,
        PORT: String(port),
        DATABASE_URL: databaseUrl,
        API_KEYS: API_KEY,
        REPLAY_KEY_ID: legacyKeyId(API_KEY),
        RATE_LIMIT_MAX: '10000000',
        LOG_LEVEL: 'warn',
        SHUTDOWN_DRAIN_MS: '0',
        // Under valgrind the loop runs late: shedding would answer 503s and skew the count.
        LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0',
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  )
}

async function waitLive(base: string, child: ChildProcess) {
  for (let i = 0; i < 1200; i++) {
    if (child.exitCode !== null) throw new Error(`${base}: exited under valgrind`)
    try {
      if ((await fetch(`${base}/live`)).status < 500) return
    } catch {}
    await sleep(500)
  }
  throw new Error(`${base}: did not start under valgrind`)
}

const bench = await createBenchDatabase('instructions', { vacuumStandIn: false })
// counts[case][target] = instructions per request
const counts = new Map<string, Map<Target, number>>()
const targets: Target[] = (
  process.env.BENCH_TARGETS?.split(',') ?? ['service', ...(BASELINE ? ['baseline'] : []), 'ceiling']
).map((t) => t.trim() as Target)
let requests: Awaited<ReturnType<typeof createBenchRequests>> | undefined
try {
  let port = Number(process.env.BENCH_PORT ?? 3641)
  for (const target of targets) {
    const dir = mkdtempSync(path.join(tmpdir(), 'callgrind-'))
    const child = startUnderCallgrind(target, dir, port, bench.url)
    const base = `http://127.0.0.1:${port++}`
    try {
      await waitLive(base, child)
      // Built once, on the service: it stores the answer the replays ask for.
      requests ??= await createBenchRequests(bench.sql, base)
      const r = requests
      const cases: [string, () => BenchRequest][] = [
        ['GET user', r.getUser],
        ['POST user (replay)', target === 'ceiling' ? r.replayUserOnCeiling : r.replayUser],
        ['POST user (new key)', r.postNewUser],
        ['PATCH user', r.patchUser],
        ['POST review', () => r.review()],
      ]
      const control = (...args: string[]) =>
        execFileSync('callgrind_control', [...args, String(child.pid)], { stdio: 'ignore' })
      const run = async (next: () => BenchRequest, amount: number) => {
        const result = (await autocannon({
          ...loadOptions(base, CONNECTIONS, 0, next),
          amount,
          timeout: 120,
        } as never)) as { requests: { total: number }; non2xx: number; errors: number }
        if (result.non2xx + result.errors > 0)
          throw new Error(`${target}: ${result.non2xx} non-2xx, ${result.errors} errors`)
        return result.requests.total
      }
      for (const [name, next] of cases.filter(([name]) => !ONLY || ONLY.includes(name))) {
        await run(next, WARMUP)
        control('--instr=on')
        await run(next, 100)
        control('-z')
        const answered = await run(next, N)
        control(`--dump=${name.replace(/\W+/g, '_')}`)
        control('--instr=off')
        await sleep(1000)
        // out.<pid>.<dump>-01: the main thread's file of the latest dump.
        const file = readdirSync(dir)
          .filter((f) => f.startsWith('out.') && f.endsWith('-01'))
          .sort((a, b) => Number(/\.(\d+)-01$/.exec(a)?.[1] ?? 0) - Number(/\.(\d+)-01$/.exec(b)?.[1] ?? 0))
          .at(-1)!
        const total = Number(/^(?:summary|totals): (\d+)/m.exec(readFileSync(`${dir}/${file}`, 'utf8'))![1])
        const byTarget = counts.get(name) ?? new Map<Target, number>()
        byTarget.set(target, total / answered)
        counts.set(name, byTarget)
        console.log(`${target} ${name}: ${(total / answered / 1000).toFixed(0)} k instructions per request`)
      }
    } finally {
      child.kill('SIGTERM')
      await new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)))
    }
  }
} finally {
  await bench.drop()
}

const printed = recordPrinted(
  'instructions',
  'Instructions per request: service, ceiling (make bench-instructions)',
  `make bench-instructions${BASELINE ? ' BENCH_BASELINE=<a built checkout>' : ''}`,
)
const k = (n: number | undefined) => (n === undefined ? '' : `${(n / 1000).toFixed(0)} k`)
console.log(
  `| case | ${targets.join(' | ')} | service / ceiling${BASELINE ? ' | service / baseline' : ''} |\n|---|${targets.map(() => '---|').join('')}---|${BASELINE ? '---|' : ''}`,
)
for (const [name, byTarget] of counts) {
  const s = byTarget.get('service')
  const c = byTarget.get('ceiling')
  const b = byTarget.get('baseline')
  const ratio = (x?: number, y?: number, digits = 2) => (x && y ? `${(x / y).toFixed(digits)}×` : '')
  console.log(
    `| ${name} | ${targets.map((t) => k(byTarget.get(t))).join(' | ')} | ${ratio(s, c)} |${BASELINE ? ` ${ratio(s, b, 3)} |` : ''}`,
  )
}
printed.write(
  `Counted by valgrind (callgrind), the main thread's user-space instructions, ${N} requests per case at ${CONNECTIONS} connections after ${WARMUP} to warm up: unmoved by other work on the machine. ` +
    "The kernel's share (socket reads and writes) and the cost of cache misses are not in a count, so these ratios are not the CPU ratios of `make bench`; they show what a change saves.",
)

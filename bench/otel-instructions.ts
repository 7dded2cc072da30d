// Instructions per request, untraced and traced (valgrind's callgrind counts them: unlike CPU
// time, the count does not move when other work shares the machine). Each service runs under
// callgrind on the same bench database; after a warm-up the counters are zeroed, a fixed number
// of requests is sent at a fixed concurrency, and the count is dumped.
// Usage: npx tsx bench/otel-instructions.ts [ratio ...]   ('' or 'off' = untraced)
import { execFileSync, spawn } from 'node:child_process'
import { createServer as createHttpServer } from 'node:http'
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import autocannon from 'autocannon'
import { projectRoot } from '../src/paths.js'
import { API_KEY, createBenchDatabase } from './harness.js'
import { type BenchRequest, createBenchRequests, loadOptions } from './requests.js'
import { recordPrinted } from './results-file.js'
import { callgrindArgs } from './callgrind.js'

const N = Number(process.env.BENCH_REQUESTS ?? 2000)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10)
const ratios = process.argv.slice(2).length ? process.argv.slice(2) : ['off', '0', '0.1', '1']

async function sink(): Promise<string> {
  const server = createHttpServer((req, res) => {
    req.resume()
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  server.unref()
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`
}

const bench = await createBenchDatabase('otelinstr', { vacuumStandIn: false })
const results: string[] = []
let requests: Awaited<ReturnType<typeof createBenchRequests>> | undefined
try {
  let port = Number(process.env.BENCH_PORT ?? 3631)
  for (const ratio of ratios) {
    const dir = mkdtempSync(path.join(tmpdir(), 'callgrind-'))
    const otel =
      ratio === 'off' || ratio === ''
        ? {}
        : {
            OTEL_EXPORTER_OTLP_ENDPOINT: await sink(),
            OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
            OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
            OTEL_TRACES_SAMPLER_ARG: ratio,
          }
    const start = () =>
      spawn('valgrind', [...callgrindArgs(dir), process.env.BENCH_NODE ?? process.execPath, 'dist/src/server.js'], {
        cwd: projectRoot,
        env: {
          ...process.env,
          PORT: String(port),
          DATABASE_URL: bench.url,
          API_KEYS: API_KEY,
          RATE_LIMIT_MAX: '10000000',
          LOG_LEVEL: 'warn',
          SHUTDOWN_DRAIN_MS: '0',
          // Under valgrind the loop runs late: shedding would answer 503s and skew the count.
          LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0',
          ...otel,
        },
        stdio: ['ignore', 'ignore', 'inherit'],
      })
    // On a busy machine a plugin can miss Fastify's start timeout under valgrind: start again.
    let child = start()
    let exited = false
    child.once('exit', () => (exited = true))
    const base = `http://127.0.0.1:${port++}`
    for (let i = 0, starts = 1; ; i++) {
      try {
        if ((await fetch(`${base}/live`)).ok) break
      } catch {}
      if (exited && starts < 3) {
        starts++
        exited = false
        child = start()
        child.once('exit', () => (exited = true))
      }
      if (i > 1200 || exited) throw new Error('service did not start under valgrind')
      await sleep(500)
    }
    // Built once: they store an answer to replay (unused here), which a second service would refuse.
    requests ??= await createBenchRequests(bench.sql, base)
    const control = (...args: string[]) =>
      execFileSync('callgrind_control', [...args, String(child.pid)], { stdio: 'ignore' })
    const run = (next: () => BenchRequest, amount: number) =>
      autocannon({ ...loadOptions(base, CONNECTIONS, 0, next), amount, timeout: 120 } as never)
    const cases: [string, () => BenchRequest][] = [
      ['GET user', requests.getUser],
      ['POST user (new key)', requests.postNewUser],
    ]
    for (const [name, next] of cases) {
      await run(next, N) // warm-up: the JIT's tiers, the pool's connections
      control('--instr=on')
      await run(next, 100) // valgrind translating the code again with the counters
      control('-z')
      const result = (await run(next, N)) as { requests: { total: number }; non2xx: number; errors: number }
      control(`--dump=${name.replace(/\W+/g, '_')}`)
      control('--instr=off')
      await sleep(2000)
      const file = readdirSync(dir)
        .filter((f) => f.startsWith('out.'))
        .sort()
        .at(-1)!
      const text = readFileSync(`${dir}/${file}`, 'utf8')
      const total = Number(/^(?:summary|totals): (\d+)/m.exec(text)![1])
      const line = `| ${name} | ${ratio} | ${result.requests.total} | ${(total / result.requests.total / 1000).toFixed(0)} k | ${result.non2xx + result.errors} |`
      results.push(line)
      console.log(line)
    }
    child.kill('SIGTERM')
    await new Promise((resolve) => child.once('exit', resolve))
  }
} finally {
  await bench.drop()
}
const printed = recordPrinted(
  'otel-instructions',
  'What tracing costs: instructions per request (make bench-otel-instructions)',
  `make bench-otel-instructions RATIOS="${process.argv.slice(2).join(' ')}"`,
)
console.log('| case | sampling | requests | instructions per request | non-2xx |\n|---|---|---|---|---|')
for (const l of results) console.log(l)
printed.write(
  'Counted by valgrind (callgrind): unmoved by other work on the machine. Analysis: docs/performance.md, "Tracing".',
)

// wrk (Debian's package) as a load generator where the generator's own CPU must not decide the
// figure: it costs a small fraction of autocannon's per request, so on this two-core machine the
// server's core, not the generator's, is the bottleneck. It sends a fixed list of requests in
// turn on every connection (a Lua script), so it suits reads; the write cases, which need a fresh
// idempotency key per request, stay on autocannon.
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { type BenchRequest, JSON_HEADERS } from './requests.js'

/** What autocannon's runs report too, so the benchmarks take either: latencies in ms. */
export interface WrkResult {
  rps: number
  total: number
  /** Answers other than 2xx/3xx, plus connect, read, write and timeout errors. */
  bad: number
  p50: number
  p99: number
}

const luaString = (s: string) => `"${s.replace(/[\\"]/g, (c) => `\\${c}`).replace(/\n/g, '\\n')}"`

/** The Lua script: every request formatted once in init, sent in turn; done prints one JSON line. */
function script(requests: BenchRequest[]): string {
  const formatted = requests.map((r) => {
    const headers = { ...JSON_HEADERS, ...r.headers }
    const table = Object.entries(headers)
      .map(([k, v]) => `[${luaString(k)}] = ${luaString(v)}`)
      .join(', ')
    return `wrk.format(${luaString(r.method)}, ${luaString(r.path)}, {${table}}, ${r.body === undefined ? 'nil' : luaString(r.body)})`
  })
  return `
local list = {}
local i = 0
init = function(args)
  list = { ${formatted.join(',\n    ')} }
end
request = function()
  i = i % #list + 1
  return list[i]
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"total":%d,"us":%d,"bad":%d,"p50":%d,"p99":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
`
}

/** One wrk run of `durationS` seconds over `connections` connections, one thread (on this process' core). */
export async function runWrk(
  base: string,
  connections: number,
  durationS: number,
  requests: BenchRequest[],
): Promise<WrkResult> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-wrk-'))
  try {
    const file = path.join(dir, 'requests.lua')
    writeFileSync(file, script(requests))
    const { stdout } = await promisify(execFile)(
      'wrk',
      ['-t1', `-c${connections}`, `-d${durationS}s`, '--timeout', '5s', '-s', file, base],
      { maxBuffer: 1 << 20 },
    )
    const line = stdout.split('\n').find((l) => l.startsWith('{"total"'))
    if (!line) throw new Error(`wrk printed no summary:\n${stdout}`)
    const r = JSON.parse(line) as { total: number; us: number; bad: number; p50: number; p99: number }
    return { rps: r.total / (r.us / 1e6), total: r.total, bad: r.bad, p50: r.p50 / 1000, p99: r.p99 / 1000 }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

// wrk (Debian's package) drives every `make bench` case: a C load generator costs a small fraction
// of a Node.js one per request, so on this two-core machine the server's core, or PostgreSQL, is
// what limits a run, not the generator. Its Lua script sends a list of requests in turn on every
// connection; a request whose text holds `{{id}}` or `{{uuid}}` gets a value no other request of
// the run has (Idempotency-Keys, new learners), so the writes are driven by wrk too; `{{ms}}`, the
// time it is sent (epoch ms, to the second).
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { type BenchRequest, JSON_HEADERS } from './requests.js'

/** Placeholders wrk fills per request: a short unique token, and a unique UUID (version 4 form). */
export const UNIQUE_ID = '{{id}}'
export const UNIQUE_UUID = '{{uuid}}'
export const NOW_MS = '{{ms}}'

/** Latencies in ms; `bad` counts answers other than 2xx/3xx plus connect, read, write and timeout errors. */
export type WrkResult = { rps: number; total: number; bad: number; p50: number; p99: number }

const luaString = (s: string) => `"${s.replace(/[\\"]/g, (c) => `\\${c}`).replace(/\n/g, '\\n')}"`
const templated = (r: BenchRequest) =>
  [r.path, r.body ?? '', ...Object.values(r.headers ?? {})].some((s) => s.includes('{{'))

/**
 * The Lua script: fixed requests are formatted once in init; a templated one is formatted each
 * time it is sent, with its placeholders filled from a counter and a per-run prefix.
 */
function script(requests: BenchRequest[]): string {
  const run = randomBytes(4).toString('hex')
  const entries = requests.map((r) => {
    const headers = { ...JSON_HEADERS, ...r.headers }
    const table = Object.entries(headers)
      .map(([k, v]) => `[${luaString(k)}] = ${luaString(v)}`)
      .join(', ')
    const body = r.body === undefined ? 'nil' : luaString(r.body)
    return `{ ${templated(r) ? 'true' : 'false'}, ${luaString(r.method)}, ${luaString(r.path)}, {${table}}, ${body} }`
  })
  return `
local list = { ${entries.join(',\n  ')} }
local formatted = {}
local i, n = 0, 0
local function fill(s, id, uuid)
  if s == nil then return nil end
  return (s:gsub("{{id}}", id):gsub("{{uuid}}", uuid):gsub("{{ms}}", string.format("%.0f", os.time() * 1000)))
end
init = function(args)
  for k, r in ipairs(list) do
    if not r[1] then formatted[k] = wrk.format(r[2], r[3], r[4], r[5]) end
  end
end
request = function()
  i = i % #list + 1
  local r = list[i]
  if not r[1] then return formatted[i] end
  n = n + 1
  local id = string.format("${run}%x", n)
  local uuid = string.format("${run}-%04x-4%03x-8%03x-%012x", math.floor(n / 16777216) % 65536, math.floor(n / 4096) % 4096, n % 4096, n)
  local headers = {}
  for k, v in pairs(r[4]) do headers[k] = fill(v, id, uuid) end
  return wrk.format(r[2], fill(r[3], id, uuid), headers, fill(r[5], id, uuid))
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
export async function runWrk(base: string, connections: number, durationS: number, requests: BenchRequest[]) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-wrk-'))
  try {
    const file = path.join(dir, 'requests.lua')
    writeFileSync(file, script(requests))
    const args = ['-t1', `-c${connections}`, `-d${durationS}s`, '--timeout', '5s', '-s', file, base]
    const { stdout } = await promisify(execFile)('wrk', args, { maxBuffer: 1 << 20 })
    const line = stdout.split('\n').find((l) => l.startsWith('{"total"'))
    if (!line) throw new Error(`wrk printed no summary:\n${stdout}`)
    const r = JSON.parse(line) as { total: number; us: number; bad: number; p50: number; p99: number }
    return {
      rps: r.total / (r.us / 1e6),
      total: r.total,
      bad: r.bad,
      p50: r.p50 / 1000,
      p99: r.p99 / 1000,
    } as WrkResult
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

// `make bench-hostile`: the HTTP edge under hostile load, against the built server (dist/).
// A benchmark, not a test: it prints a table and the targets; it fails nothing.
//   1. amplification: one 1 MiB telemetry batch of `{}` items (answer time and bytes, /live meanwhile)
//   2. stalled uploads: sockets that announce 1 MiB, send half and stall (peak RSS, time to close, RSS after)
//   3. address flood: requests without a key from distinct 127.0.0.0/8 addresses (RSS, a key's window)
//   4. overload: about 4x the measured capacity for a while (share of 503, p99 accepted, recovery)
//   5. one partner against another: while a second partner writes and reads steadily, a key that
//      holds `telemetry:ingest` alone runs 40 slow uploads (1 MiB announced, a byte every 2 s),
//      then 8 clients posting ~1 MiB bodies whose `payload` has 90,000 keys (the partner's
//      non-2xx and p99 against its p99 alone, /live's p99, the attacker's statuses)
//   6. many keys of one partner: a partner key allowed 4 requests in progress creates 8 keys, and
//      each holds 4 slow uploads to POST /api/v1/user (1 MiB announced, a byte every 2 s) while the
//      second partner writes and reads steadily (its non-2xx and p99 against its p99 alone)
// BENCH_HOSTILE_PARTS (e.g. "1,3"), BENCH_STALLED (2000), BENCH_ADDRESSES (100000),
// BENCH_OVERLOAD_SECONDS (30), BENCH_REQUEST_TIMEOUT_MS (the server's REQUEST_TIMEOUT_MS, 10000 here).
import autocannon from 'autocannon'
import { randomBytes } from 'node:crypto'
import http from 'node:http'
import net from 'node:net'
import { execSync } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { migrate } from '../src/db/migrate.js'
import { ADMIN_URL, databaseUrl } from '../test/helpers/database.js'
import { freePort } from '../test/helpers/server-process.js'
import { API_KEY, benchNodeOptions, cpuTicks, startServer, stopServers } from './harness.js'
import { writeResults } from './results-file.js'

const parts = new Set((process.env.BENCH_HOSTILE_PARTS ?? '1,2,3,4').split(','))
const STALLED = Number(process.env.BENCH_STALLED ?? 2000)
const ADDRESSES = Number(process.env.BENCH_ADDRESSES ?? 100_000)
const OVERLOAD_SECONDS = Number(process.env.BENCH_OVERLOAD_SECONDS ?? 30)
const REQUEST_TIMEOUT_MS = Number(process.env.BENCH_REQUEST_TIMEOUT_MS ?? 10_000)
const KEY_WINDOW_MAX = 10_000_000
const FAIR_SECONDS = Number(process.env.BENCH_FAIR_SECONDS ?? 15)
const ATTACKER_KEY = 'ssk_bench_attacker'
const PARTNER_KEY = 'ssk_bench_partner'
const MANY_KEY = 'ssk_bench_many'

const rows: [string, string, string][] = []
const report = (measure: string, value: string, target = '') => {
  rows.push([measure, value, target])
  console.log(`${measure}: ${value}${target ? `   (target ${target})` : ''}`)
}
const mib = (bytes: number) => `${(bytes / 1048576).toFixed(0)} MiB`
const rss = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024
const percentile = (xs: number[], p: number) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
}

// ---- A server on an empty database -------------------------------------------------------
const dbName = `bench_hostile_${randomBytes(3).toString('hex')}`
const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
await admin.unsafe(`create database "${dbName}"`)
const dbUrl = databaseUrl(dbName)
const sql = postgres(dbUrl, { max: 1, onnotice: () => {} })
await migrate(sql as never)
await sql.end()
const port = await freePort()
// Parts 1 to 4 measure the process-wide protections with one key, so that key may hold as much
// as a key can (half the body budget, unbounded requests in progress); part 5's two partners
// have the defaults, the attacker only `telemetry:ingest` (the kind a web page ships).
const keyDir = mkdtempSync(path.join(os.tmpdir(), 'bench-keys-'))
const sha256 = (secret: string) => createHash('sha256').update(secret).digest('hex')
writeFileSync(
  path.join(keyDir, 'keys.json'),
  JSON.stringify([
    {
      id: 'bench',
      secret_sha256: sha256(API_KEY),
      max_concurrent_requests: 100_000,
      max_body_bytes_in_flight: 16 * 1_048_576,
    },
    { id: 'attacker', secret_sha256: sha256(ATTACKER_KEY), scopes: ['telemetry:ingest'] },
    { id: 'partner', secret_sha256: sha256(PARTNER_KEY) },
    { id: 'many', secret_sha256: sha256(MANY_KEY), scopes: ['keys:admin', 'users:write'], max_concurrent_requests: 4 },
  ]),
)
const server = await startServer('service', [...benchNodeOptions(), 'dist/src/server.js'], port, {
  DATABASE_URL: dbUrl,
  API_KEYS_FILE: path.join(keyDir, 'keys.json'),
  RATE_LIMIT_MAX: String(KEY_WINDOW_MAX),
  // An hour: the key's window must not slide during the bench, so any change in it is the flood's.
  RATE_LIMIT_WINDOW_MS: '3600000',
  REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
  LOG_LEVEL: 'warn',
  SHUTDOWN_DRAIN_MS: '0',
})
const pid = server.process.pid!
const base = server.base
const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 4 })

function get(
  path: string,
  headers: Record<string, string> = {},
  agent: http.Agent = keepAlive,
): Promise<{ status: number; ms: number; headers: http.IncomingHttpHeaders }> {
  const start = performance.now()
  return new Promise((resolve, reject) => {
    http
      .get(`${base}${path}`, { agent, headers }, (res) => {
        res.resume()
        res.on('end', () => resolve({ status: res.statusCode!, ms: performance.now() - start, headers: res.headers }))
      })
      .on('error', reject)
  })
}

/** Polls /live every 5 ms until `done` resolves; returns the latencies. */
async function pollLive(done: Promise<unknown>): Promise<number[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const latencies: number[] = []
  let finished = false
  done.finally(() => (finished = true))
  while (!finished) {
    latencies.push((await get('/live', {}, agent)).ms)
    await sleep(5)
  }
  agent.destroy()
  return latencies
}

// ---- 1. Amplification ---------------------------------------------------------------------------
if (parts.has('1')) {
  const body = Buffer.from(`{"events":[${new Array(349_000).fill('{}').join(',')}]}`)
  await sleep(200)
  const ticksBefore = cpuTicks(pid)
  const start = performance.now()
  const answer = new Promise<{ status: number; bytes: number; ms: number }>((resolve, reject) => {
    const req = http.request(
      `${base}/api/v1/telemetry/docs-search/batch`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': body.length, 'x-api-key': API_KEY },
      },
      (res) => {
        let bytes = 0
        res.on('data', (c: Buffer) => (bytes += c.length))
        res.on('end', () => resolve({ status: res.statusCode!, bytes, ms: performance.now() - start }))
      },
    )
    req.on('error', reject)
    req.end(body)
  })
  const live = await pollLive(answer)
  const { status, bytes, ms } = await answer
  report('amplification: 1 MiB batch of 349,000 {} answered', `${status} in ${ms.toFixed(0)} ms`, '< 100 ms')
  // CPU time does not grow with other processes' load the way wall time does on a shared machine.
  report('amplification: server CPU time for it (incl. /live probes)', `${(cpuTicks(pid) - ticksBefore) * 10} ms`)
  report('amplification: answer size', `${bytes} bytes`, '<= 64 KiB')
  report(
    'amplification: /live during it (p99 / worst)',
    `${percentile(live, 99).toFixed(1)} / ${Math.max(...live).toFixed(1)} ms over ${live.length} probes`,
    'p99 < 50 ms',
  )
}

// ---- 2. Stalled uploads ---------------------------------------------------------------------------
// Each socket's hold time runs from its connection (the server cannot time out a request it has
// not received: 2,000 connects at once overflow the listen backlog, and the kernel retries the
// dropped SYNs 1 s and 3 s later) to its close; the wall time of the whole batch is reported too.
if (parts.has('2')) {
  const before = rss(pid)
  let peak = before
  const sampler = setInterval(() => (peak = Math.max(peak, rss(pid))), 100)
  const half = Buffer.alloc(512 * 1024, 0x20)
  const start = performance.now()
  let closedAt = 0
  let open = 0
  let worstHold = 0
  let lastConnect = 0
  // What each socket was answered (its status line), or 'none' when it was closed without one.
  const answers = new Map<string, number>()
  const sockets = Array.from({ length: STALLED }, () => {
    const socket = net.connect(port, '127.0.0.1')
    let connectedAt = Number.NaN
    open++
    socket.on('connect', () => {
      connectedAt = lastConnect = performance.now()
      socket.write(
        `POST /api/v1/telemetry/docs-search HTTP/1.1\r\nHost: x\r\nX-API-Key: ${API_KEY}\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n`,
      )
      socket.write(half)
    })
    let status = ''
    socket.on('data', (chunk: Buffer) => {
      if (!status) status = chunk.toString('latin1', 9, 12)
    })
    socket.on('error', () => {})
    return new Promise<void>((resolve) =>
      socket.on('close', () => {
        answers.set(status || 'none', (answers.get(status || 'none') ?? 0) + 1)
        open--
        closedAt = performance.now()
        worstHold = Math.max(worstHold, closedAt - connectedAt)
        resolve()
      }),
    )
  })
  const limit = REQUEST_TIMEOUT_MS + 30_000
  const all = await Promise.race([Promise.all(sockets).then(() => true), sleep(limit).then(() => false)])
  clearInterval(sampler)
  await sleep(2000)
  const after2s = rss(pid)
  // Then how long until RSS is back within 10 % of its start (V8 and malloc give memory back lazily).
  let backAfter = Number.NaN
  for (let waited = 2000; waited <= 30_000; waited += 500) {
    if (rss(pid) <= before * 1.1) {
      backAfter = waited
      break
    }
    await sleep(500)
  }
  report(`stalled uploads: ${STALLED} x 1 MiB (half sent), RSS start / peak`, `${mib(before)} / ${mib(peak)}`)
  report(
    'stalled uploads: longest a socket was held (connect to close)',
    all ? `${(worstHold / 1000).toFixed(1)} s` : `not within ${limit / 1000} s (${open} still open)`,
    `<= REQUEST_TIMEOUT_MS + 1 s = ${(REQUEST_TIMEOUT_MS + 1000) / 1000} s`,
  )
  report(
    'stalled uploads: answers',
    [...answers]
      .sort()
      .map(([status, n]) => `${status} × ${n}`)
      .join(', '),
  )
  report(
    'stalled uploads: whole batch, first connect attempt to last close',
    all
      ? `${((closedAt - start) / 1000).toFixed(1)} s (last connection made after ${((lastConnect - start) / 1000).toFixed(1)} s)`
      : 'n/a',
  )
  report(
    'stalled uploads: RSS 2 s after',
    `${mib(after2s)} (${(((after2s - before) / before) * 100).toFixed(0)} % above start)`,
  )
  report(
    'stalled uploads: RSS back within 10 % of start',
    Number.isNaN(backAfter)
      ? `not within 30 s (${mib(rss(pid))})`
      : `${(backAfter / 1000).toFixed(1)} s after the last close`,
    'within 10 % of start',
  )
}

// ---- 3. Address flood ---------------------------------------------------------------------------
if (parts.has('3')) {
  const probe = async () =>
    Number(
      (await get('/api/v1/telemetry/docs-search/metrics', { 'x-api-key': API_KEY })).headers['x-ratelimit-remaining'],
    )
  const before = rss(pid)
  const remainingBefore = await probe()
  const statuses = new Map<number, number>()
  let next = 0
  const start = performance.now()
  const worker = async () => {
    while (next < ADDRESSES) {
      const i = next++
      // 127.0.0.0/8 only: 127.1.0.0 upwards, one address per request, loopback never leaves the host.
      const localAddress = `127.${1 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`
      const agent = new http.Agent({ keepAlive: false, localAddress })
      try {
        const { status } = await get('/api/v1/telemetry/docs-search/metrics', {}, agent)
        statuses.set(status, (statuses.get(status) ?? 0) + 1)
      } catch {
        statuses.set(0, (statuses.get(0) ?? 0) + 1)
      }
    }
  }
  await Promise.all(Array.from({ length: 64 }, worker))
  const seconds = (performance.now() - start) / 1000
  const remainingAfter = await probe()
  report(
    `address flood: ${ADDRESSES} addresses without a key`,
    `${[...statuses].map(([s, n]) => `${s || 'error'}×${n}`).join(' ')} in ${seconds.toFixed(0)} s`,
  )
  report('address flood: RSS before / after', `${mib(before)} / ${mib(rss(pid))}`)
  report(
    "address flood: the key's window",
    `remaining ${remainingBefore} before, ${remainingAfter} after (one request between)`,
    'intact: after = before - 1',
  )
}

// ---- 4. Overload ------------------------------------------------------------------------------------
if (parts.has('4')) {
  const url = `${base}/api/v1/telemetry/docs-search/metrics`
  const headers = { 'x-api-key': API_KEY }
  const capacity = await autocannon({ url, headers, connections: 20, duration: 5 })
  const rate = Math.round(capacity.requests.average * 4)
  const accepted: number[] = []
  const statuses = new Map<number, number>()
  const run = autocannon({ url, headers, connections: 400, duration: OVERLOAD_SECONDS, overallRate: rate, timeout: 10 })
  ;(
    run as unknown as { on(e: 'response', l: (c: unknown, status: number, bytes: number, ms: number) => void): void }
  ).on('response', (_c, status, _b, ms) => {
    statuses.set(status, (statuses.get(status) ?? 0) + 1)
    if (status !== 503) accepted.push(ms)
  })
  const result = await run
  const end = performance.now()
  let recoveredAt = 0
  for (let ok = 0; ok < 5 && performance.now() - end < 30_000; ) {
    const { status } = await get('/api/v1/telemetry/docs-search/metrics', headers)
    ok = status === 200 ? ok + 1 : 0
    if (ok === 1) recoveredAt = performance.now()
    await sleep(20)
  }
  const total = [...statuses.values()].reduce((a, b) => a + b, 0)
  const shed = statuses.get(503) ?? 0
  const other5xx = [...statuses].filter(([s]) => s >= 500 && s !== 503).reduce((a, [, n]) => a + n, 0)
  report(
    'overload: measured capacity',
    `${capacity.requests.average.toFixed(0)} req/s; offered ${rate} req/s for ${OVERLOAD_SECONDS} s`,
  )
  report(
    'overload: answered 503',
    `${((shed / Math.max(total, 1)) * 100).toFixed(1)} % of ${total} (errors/timeouts ${result.errors})`,
  )
  report('overload: 5xx other than 503', String(other5xx), '0')
  report('overload: p99 of accepted', `${percentile(accepted, 99).toFixed(0)} ms`, '<= 1000 ms')
  report(
    'overload: recovered after',
    recoveredAt ? `${((recoveredAt - end) / 1000).toFixed(2)} s` : 'not within 30 s',
    '< 2 s',
  )
}

// ---- 5. One partner against another; 6. many keys of one partner ------------------------------
if (parts.has('5') || parts.has('6')) {
  interface Partner {
    statuses: Map<number, number>
    latencies: number[]
    /** when each answer arrived (performance.now()), to tell the attack's phases apart */
    ends: number[]
  }
  const partnerAgent = new http.Agent({ keepAlive: true, maxSockets: 2 })
  const call = (method: string, url: string, body?: string, key = PARTNER_KEY, agent: http.Agent = partnerAgent) =>
    new Promise<{ status: number; ms: number }>((resolve) => {
      const start = performance.now()
      const headers: Record<string, string | number> = { 'x-api-key': key }
      if (body !== undefined) {
        headers['content-type'] = 'application/json'
        headers['content-length'] = Buffer.byteLength(body)
        headers['idempotency-key'] = randomBytes(8).toString('hex')
      }
      const req = http.request(`${base}${url}`, { method, headers, agent }, (res) => {
        res.resume()
        res.on('end', () => resolve({ status: res.statusCode!, ms: performance.now() - start }))
      })
      req.on('error', () => resolve({ status: 0, ms: performance.now() - start }))
      req.end(body)
    })
  /** Two loops of user create, user read and, every fifth round, a telemetry event, until `done`. */
  const steadyPartner = async (done: Promise<unknown>): Promise<Partner> => {
    const partner: Partner = { statuses: new Map(), latencies: [], ends: [] }
    let finished = false
    done.finally(() => (finished = true))
    const record = ({ status, ms }: { status: number; ms: number }) => {
      partner.statuses.set(status, (partner.statuses.get(status) ?? 0) + 1)
      partner.latencies.push(ms)
      partner.ends.push(performance.now())
    }
    const loop = async (lane: number) => {
      for (let round = 0; !finished; round++) {
        const owner = {
          system_uuid: '3f2c2f57-9d55-4a0b-8a3c-1c1f5b2f4e10',
          system_user_id: `p${lane}-${round}-${randomBytes(3).toString('hex')}`,
        }
        record(await call('POST', '/api/v1/user', JSON.stringify({ ...owner, full_name: 'Steady', timezone: 'UTC' })))
        record(await call('GET', `/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`))
        if (round % 5 === 0)
          record(
            await call(
              'POST',
              '/api/v1/telemetry/docs-search',
              JSON.stringify({ event: 'search_query', emitted_at_ms: Date.now(), query_text: 'steady' }),
            ),
          )
        await sleep(20)
      }
    }
    await Promise.all([loop(0), loop(1)])
    return partner
  }
  const count = (map: Map<number | string, number>, status: number | string) =>
    map.set(status, (map.get(status) ?? 0) + 1)
  const show = (map: Map<number | string, number>) =>
    [...map]
      .sort()
      .map(([status, n]) => `${status || 'none'} × ${n}`)
      .join(', ')
  const non2xx = (p: Partner) => [...p.statuses].filter(([s]) => s < 200 || s > 299).reduce((a, [, n]) => a + n, 0)

  // Alone.
  const quiet = sleep(FAIR_SECONDS * 1000)
  const [alone, liveAlone] = await Promise.all([steadyPartner(quiet), pollLive(quiet)])

  // Slow uploads: sockets (40 of the ingest key, or 4 of each given key), each announcing 1 MiB and
  // sending a byte every 2 s; a closed one is opened again after 250 ms (the attacker persists),
  // until the time is up.
  const slowAnswers = new Map<number | string, number>()
  const slowUploads = async (
    until: number,
    sockets: string[] = new Array(40).fill(ATTACKER_KEY),
    head = (key: string) =>
      `POST /api/v1/telemetry/docs-search/batch HTTP/1.1\r\nHost: x\r\nX-API-Key: ${key}\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n{"events":[`,
    answers = slowAnswers,
  ) => {
    const one = (key: string) =>
      new Promise<void>((resolve) => {
        const socket = net.connect(port, '127.0.0.1')
        let status = ''
        let drip: NodeJS.Timeout | undefined
        socket.on('connect', () => {
          socket.write(head(key))
          drip = setInterval(() => socket.write(' '), 2000)
        })
        socket.on('data', (chunk: Buffer) => {
          if (!status) status = chunk.toString('latin1', 9, 12)
        })
        socket.on('error', () => {})
        const stop = setTimeout(() => socket.destroy(), Math.max(0, until - performance.now()))
        socket.on('close', () => {
          clearInterval(drip)
          clearTimeout(stop)
          count(answers, status ? Number(status) : performance.now() >= until ? 'held at the end' : 0)
          resolve()
        })
      })
    await Promise.all(
      sockets.map(async (key) => {
        while (performance.now() < until) {
          await one(key)
          await sleep(250)
        }
      }),
    )
  }
  // The flood: 8 clients posting a ~1 MiB batch whose one event's payload has 90,000 keys.
  const floodAnswers = new Map<number | string, number>()
  const flood = async (until: number) => {
    const keys = `{${Array.from({ length: 90_000 }, (_, i) => `"k${i}":1`).join(',')}}`
    const body = JSON.stringify({ events: [{ event: 'search_query', emitted_at_ms: 1, payload: '§' }] }).replace(
      '"§"',
      keys,
    )
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 })
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (performance.now() < until) {
          const { status } = await call('POST', '/api/v1/telemetry/docs-search/batch', body, ATTACKER_KEY, agent)
          count(floodAnswers, status)
        }
      }),
    )
    agent.destroy()
  }
  if (parts.has('6')) {
    // The partner `many` creates 8 keys (of its own limits); each holds 4 slow user uploads.
    const children: string[] = []
    for (let i = 0; i < 8; i++) {
      const body = JSON.stringify({ id: `many-${i}`, scopes: ['users:write'] })
      const created = await new Promise<string>((resolve, reject) => {
        const req = http.request(
          `${base}/api/v1/admin/keys`,
          {
            method: 'POST',
            headers: {
              'x-api-key': MANY_KEY,
              'content-type': 'application/json',
              'idempotency-key': randomBytes(8).toString('hex'),
            },
          },
          (res) => {
            let text = ''
            res.on('data', (c) => (text += c))
            res.on('end', () => (res.statusCode === 201 ? resolve(JSON.parse(text).secret) : reject(new Error(text))))
          },
        )
        req.end(body)
      })
      children.push(created)
    }
    const manyAnswers = new Map<number | string, number>()
    const userUpload = (key: string) =>
      `POST /api/v1/user HTTP/1.1\r\nHost: x\r\nX-API-Key: ${key}\r\nContent-Type: application/json\r\nIdempotency-Key: ${randomBytes(8).toString('hex')}\r\nContent-Length: 1048576\r\n\r\n{"system_user_id":`
    const manyKeys = slowUploads(
      performance.now() + FAIR_SECONDS * 1000,
      children.flatMap((key) => [key, key, key, key]),
      userUpload,
      manyAnswers,
    )
    const underMany = await steadyPartner(manyKeys)
    const ratioMany = percentile(underMany.latencies, 99) / percentile(alone.latencies, 99)
    report(
      `fairness: partner under 8 created keys' slow uploads (${FAIR_SECONDS} s), non-2xx`,
      `${non2xx(underMany)} of ${underMany.latencies.length} (${show(underMany.statuses)})`,
      '0',
    )
    report(
      'fairness: partner p99 under the many keys / alone',
      `${percentile(underMany.latencies, 99).toFixed(1)} ms / ${percentile(alone.latencies, 99).toFixed(1)} ms = ${ratioMany.toFixed(2)}`,
      '<= 3',
    )
    report("fairness: the 8 created keys' slow uploads answered", show(manyAnswers), "429 past the partner's 4")
  }
  if (parts.has('5')) await partFive()
  else partnerAgent.destroy()

  async function partFive() {
    let floodStart = Number.POSITIVE_INFINITY
    const attack = (async () => {
      await slowUploads(performance.now() + FAIR_SECONDS * 1000)
      floodStart = performance.now()
      await flood(performance.now() + FAIR_SECONDS * 1000)
    })()
    const [attacked, live] = await Promise.all([steadyPartner(attack), pollLive(attack)])
    partnerAgent.destroy()
    const ticks = `${FAIR_SECONDS} s alone, then ${FAIR_SECONDS} s of slow uploads and ${FAIR_SECONDS} s of the flood`
    report(
      `fairness: partner alone (${ticks})`,
      `${alone.latencies.length} requests, non-2xx ${non2xx(alone)}, p99 ${percentile(alone.latencies, 99).toFixed(1)} ms`,
    )
    report(
      'fairness: partner under attack, non-2xx',
      `${non2xx(attacked)} of ${attacked.latencies.length} (${show(attacked.statuses)})`,
      '0',
    )
    const ratio = percentile(attacked.latencies, 99) / percentile(alone.latencies, 99)
    report(
      'fairness: partner p99 under attack / alone',
      `${percentile(attacked.latencies, 99).toFixed(1)} ms / ${percentile(alone.latencies, 99).toFixed(1)} ms = ${ratio.toFixed(2)}`,
      '<= 3',
    )
    const during = (flooding: boolean) =>
      attacked.latencies.filter((_, i) => attacked.ends[i]! >= floodStart === flooding)
    report(
      'fairness: partner p99 during the slow uploads / during the flood',
      `${percentile(during(false), 99).toFixed(1)} ms / ${percentile(during(true), 99).toFixed(1)} ms`,
      '',
    )
    report(
      'fairness: /live during the attacks (p99 / worst)',
      `${percentile(live, 99).toFixed(1)} / ${Math.max(...live).toFixed(1)} ms over ${live.length} probes (alone: p99 ${percentile(liveAlone, 99).toFixed(1)} ms)`,
      'p99 < 100 ms',
    )
    report('fairness: attacker slow uploads answered', show(slowAnswers), '429 / 408')
    report('fairness: attacker 90,000-key flood answered', show(floodAnswers), '422 / 429')
    const fairRows = rows.filter(([measure]) => measure.startsWith('fairness:'))
    const commit = execSync('git rev-parse --short HEAD', { encoding: 'utf8' }).trim()
    const load = os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' / ')
    writeFileSync(
      'bench/fairness.md',
      `# One partner against another (\`make bench-hostile\`, parts 5 and 6)\n\n` +
        `${new Date().toISOString()}, commit ${commit}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ` +
        `load average at the end ${load} (1 / 5 / 15 min: the host is shared, so compare the ratios of one run), ` +
        `\`BENCH_HOSTILE_PARTS=${[...parts].filter((p) => p === '5' || p === '6').join(',')} npx tsx bench/hostile.ts\` on the built server (defaults but the keys in the script).\n\n` +
        `| measure | value | target |\n|---|---|---|\n${fairRows.map((r) => `| ${r.join(' | ')} |`).join('\n')}\n`,
    )
  }
}

keepAlive.destroy()
await stopServers()
await admin.unsafe(`drop database if exists "${dbName}" with (force)`)
await admin.end()

const table = `| measure | value | target |\n|---|---|---|\n${rows.map((r) => `| ${r.join(' | ')} |`).join('\n')}`
console.log(`\n${table}`)
// A run of some parts only (BENCH_HOSTILE_PARTS) prints; a full run replaces the results file.
if (!process.env.BENCH_HOSTILE_PARTS)
  console.log(
    `results: ${writeResults('hostile', 'The HTTP edge under hostile load (make bench-hostile)', 'make bench-hostile', `Against the built server, \`REQUEST_TIMEOUT_MS\` ${REQUEST_TIMEOUT_MS}.\n\n${table}`)}`,
  )

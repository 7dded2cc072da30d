// `make bench`: the service against a bare Fastify + postgres.js "ceiling" doing only the SQL
// each route needs, interleaved in one run on a fresh database. Servers run on core 0, this
// driver (autocannon) on core 1 (the Makefile pins it). Every figure is also given as a
// ratio service/ceiling, because absolute numbers on a shared machine drift by tens of percent.
import { randomBytes, randomUUID } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import autocannon from 'autocannon'
import { projectRoot } from '../src/paths.js'
import { API_KEY as KEY, SERVER_CPU, createBenchDatabase, startServer, startService, stopServers } from './harness.js'

const DURATION = Number(process.env.BENCH_DURATION ?? 5)
const RUNS = Number(process.env.BENCH_RUNS ?? 3)
const CONNECTIONS = (process.env.BENCH_CONNECTIONS ?? '10,50').split(',').map(Number)
// Comma-separated case-name prefixes to run (all when unset), e.g. BENCH_CASES='GET user,POST user'.
const ONLY = process.env.BENCH_CASES?.split(',').map((x) => x.trim().toLowerCase())

const bench = await createBenchDatabase('bench')
const sql = bench.sql

interface Case {
  name: string
  ceiling: boolean
  /** events per request, for throughput in events/s */
  perRequest?: number
  request: () => { method: string; path: string; body?: string; headers?: Record<string, string> }
}

async function drive(base: string, c: Case, connections: number) {
  const result = await autocannon({
    url: base,
    connections,
    duration: DURATION,
    headers: { 'x-api-key': KEY, 'content-type': 'application/json' },
    requests: [{ setupRequest: (req: Record<string, unknown>) => ({ ...req, ...c.request(), headers: { ...(req.headers as object), ...c.request().headers } }) }],
  } as never)
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, bad: result.non2xx + result.errors }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

try {
  const users = await sql<{ system_user_id: string; system_uuid: string }[]>`select system_user_id, system_uuid from users order by system_user_id`
  const notes = (await sql<{ id: string }[]>`select conspectus_uuid::text as id from conspectuses`).map((r) => r.id)
  const dueOwner = users[0]!

  // BENCH_PROFILE: a folder for a V8 CPU profile of the service, written when it stops.
  const service = (await startService(bench.url, 3601, process.env.BENCH_PROFILE)).base
  const ceiling = (await startServer('ceiling', ['--import', 'tsx', 'bench/ceiling-server.ts'], 3602, { DATABASE_URL: bench.url })).base

  const replayBody = JSON.stringify({ system_user_id: 'replay-user', system_uuid: randomUUID(), full_name: 'Replay' })
  await fetch(`${service}/api/v1/user`, { method: 'POST', body: replayBody, headers: { 'x-api-key': KEY, 'content-type': 'application/json', 'idempotency-key': 'replay-key' } })

  let n = 0
  const nextUser = () => users[n++ % users.length]!
  const unique = () => `${process.pid}-${n++}-${randomBytes(4).toString('hex')}`
  const telemetryBatch = JSON.stringify({ events: Array.from({ length: 500 }, (_, i) => ({ event: i % 3 ? 'search_query' : 'search_result_click', emitted_at_ms: Date.now(), query_id: `q${i % 50}`, results_count: i % 5 })) })
  const cases: Case[] = [
    { name: 'GET user', ceiling: true, request: () => { const u = nextUser(); return { method: 'GET', path: `/api/v1/user/${u.system_uuid}/${u.system_user_id}` } } },
    { name: 'POST user (new key)', ceiling: true, request: () => { const id = unique(); return { method: 'POST', path: '/api/v1/user', body: JSON.stringify({ system_user_id: `p${id}`.slice(0, 36), system_uuid: randomUUID(), full_name: 'New' }), headers: { 'idempotency-key': id } } } },
    { name: 'POST user (replay)', ceiling: false, request: () => ({ method: 'POST', path: '/api/v1/user', body: replayBody, headers: { 'idempotency-key': 'replay-key' } }) },
    { name: 'PATCH user', ceiling: true, request: () => { const u = nextUser(); return { method: 'PATCH', path: `/api/v1/user/${u.system_uuid}/${u.system_user_id}`, body: JSON.stringify({ username: `n${n}` }), headers: { 'idempotency-key': unique() } } } },
    { name: 'GET due list (50 rows)', ceiling: true, request: () => ({ method: 'GET', path: `/api/v1/conspectuses/due?system_user_id=${dueOwner.system_user_id}&system_uuid=${dueOwner.system_uuid}&limit=50` }) },
    { name: 'POST review', ceiling: true, request: () => { const id = notes[n++ % notes.length]!; const u = users[Math.floor(notes.indexOf(id) / 10)] ?? users[0]!; void u; return { method: 'POST', path: `/api/v1/conspectuses/${id}/actions/review`, body: '', headers: { 'idempotency-key': unique() } } } },
    { name: 'telemetry batch (500 events)', ceiling: true, perRequest: 500, request: () => ({ method: 'POST', path: '/api/v1/telemetry/docs-search/batch', body: telemetryBatch }) },
  ]
  // Reviews need the owner key in the body: map each note to its owner once.
  const owners = new Map((await sql<{ id: string; system_user_id: string; system_uuid: string }[]>`
    select c.conspectus_uuid::text as id, u.system_user_id, u.system_uuid from conspectuses c join users u on u.client_uuid = c.user_id`).map((r) => [r.id, r]))
  cases[5]!.request = () => {
    const id = notes[n++ % notes.length]!
    const o = owners.get(id)!
    return { method: 'POST', path: `/api/v1/conspectuses/${id}/actions/review`, body: JSON.stringify({ system_user_id: o.system_user_id, system_uuid: o.system_uuid, outcome: 'remembered' }), headers: { 'idempotency-key': unique() } }
  }

  const rows: string[] = []
  const summary: Record<string, { service: number; ceiling?: number; p99s: number; p99c?: number }> = {}
  for (const c of cases) {
    if (ONLY && !ONLY.some((prefix) => c.name.toLowerCase().startsWith(prefix))) continue
    for (const connections of CONNECTIONS) {
      const s: Awaited<ReturnType<typeof drive>>[] = []
      const k: Awaited<ReturnType<typeof drive>>[] = []
      for (let r = 0; r < RUNS; r++) {
        s.push(await drive(service, c, connections))
        if (c.ceiling) k.push(await drive(ceiling, c, connections))
      }
      const per = c.perRequest ?? 1
      const sr = median(s.map((x) => x.rps)) * per
      const kr = c.ceiling ? median(k.map((x) => x.rps)) * per : undefined
      const spread = (xs: number[]) => `${Math.round(Math.min(...xs) * per)}–${Math.round(Math.max(...xs) * per)}`
      summary[`${c.name}@${connections}`] = { service: sr, ceiling: kr, p99s: median(s.map((x) => x.p99)), p99c: c.ceiling ? median(k.map((x) => x.p99)) : undefined }
      rows.push(
        `| ${c.name} | ${connections} | ${Math.round(sr)} (${spread(s.map((x) => x.rps))}) | ${kr ? Math.round(kr) : 'n/a'} | ${kr ? (sr / kr).toFixed(2) : 'n/a'} | ${median(s.map((x) => x.p50))} / ${median(s.map((x) => x.p99))} | ${c.ceiling ? `${median(k.map((x) => x.p50))} / ${median(k.map((x) => x.p99))}` : 'n/a'} | ${s.reduce((a, x) => a + x.bad, 0)} |`,
      )
      console.log(rows[rows.length - 1])
    }
  }

  // Telemetry metrics over exactly 1M events (the ingest case above stored its own first).
  const timings: number[] = []
  if (!ONLY || ONLY.some((prefix) => 'telemetry metrics'.startsWith(prefix))) {
  await sql`truncate docs_search_events`
  await sql`insert into docs_search_events (event, emitted_at_ms, query_id, results_count, time_to_success_ms)
            select case when i % 3 = 0 then 'search_result_click' else 'search_query' end, ${Date.now()}::bigint - (i % 86400) * 1000,
                   'q-' || (i % 50000), i % 7, case when i % 5 = 0 then 1000 + i % 9000 else 0 end
            from generate_series(1, 1000000) i`
  await sql`vacuum analyze docs_search_events`
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now()
    await (await fetch(`${service}/api/v1/telemetry/docs-search/metrics?window_minutes=10080`, { headers: { 'x-api-key': KEY } })).json()
    timings.push(performance.now() - t0)
  }
  }
  const metricsMs = timings.length ? median(timings) : Number.NaN

  const replay = summary['POST user (replay)@50']?.service ?? 0
  const get50 = summary['GET user@50']
  const post50 = summary['POST user (new key)@50']
  const targets = [
    `GET user >= 0.75 of ceiling: ${get50?.ceiling ? (get50.service / get50.ceiling).toFixed(2) : 'n/a'}; p99 <= 2x ceiling: ${get50?.p99c ? (get50.p99s / get50.p99c).toFixed(2) : 'n/a'}x`,
    `POST user >= 0.85 of ceiling: ${post50?.ceiling ? (post50.service / post50.ceiling).toFixed(2) : 'n/a'}`,
    `replayed POST >= GET user: ${Math.round(replay)} vs ${Math.round(get50?.service ?? 0)} req/s`,
    `telemetry batch ingest >= 20,000 events/s: ${Math.round(summary['telemetry batch (500 events)@50']?.service ?? 0)}`,
    `metrics over 1M events <= 300 ms: ${metricsMs.toFixed(0)} ms (median of 5)`,
  ]
  const table = [
    `# Benchmark results`,
    ``,
    `${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, PostgreSQL on the same machine.`,
    `Servers pinned to core ${SERVER_CPU}, autocannon on the other; ${RUNS} runs of ${DURATION} s per case, medians (min–max).`,
    ``,
    `| case | conns | service req/s | ceiling req/s | ratio | service p50/p99 ms | ceiling p50/p99 ms | non-2xx |`,
    `|---|---|---|---|---|---|---|---|`,
    ...rows,
    ``,
    `Telemetry batch rows are events/s. Targets (50 connections):`,
    ``,
    ...targets.map((x) => `- ${x}`),
    ``,
  ].join('\n')
  // A partial run (BENCH_CASES) only prints: bench/results.md always holds a full run.
  if (!ONLY) writeFileSync(path.join(projectRoot, 'bench/results.md'), table)
  console.log(`\n${table}`)
} finally {
  await stopServers()
  await bench.drop()
}

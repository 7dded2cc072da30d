// Telemetry figures: batch ingest throughput (events/s over HTTP) and the metrics query time
// over 1M stored events. A benchmark, not a test: `make bench-telemetry`.
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'
import { createClient } from '../src/db/client.js'
import { migrate } from '../src/db/migrate.js'
import { ADMIN_URL, databaseUrl } from '../test/helpers/database.js'

const BATCHES = Number(process.env.BENCH_BATCHES ?? 400)
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8)
const TOTAL_EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000)

const name = `bench_telemetry_${randomBytes(3).toString('hex')}`
const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
await admin.unsafe(`create database "${name}"`)
const sql = createClient(databaseUrl(name), { max: 10 })
try {
  await migrate(sql)
  const app = await buildApp({ config: loadConfig({ API_KEYS: 'bench', LOG_LEVEL: 'silent', RATE_LIMIT_MAX: '10000000' }), sql, logger: false })
  const address = await app.listen({ port: 0, host: '127.0.0.1' })
  const now = Date.now()
  const batch = JSON.stringify({
    events: Array.from({ length: 500 }, (_, i) => ({
      event: i % 3 === 0 ? 'search_result_click' : 'search_query',
      emitted_at_ms: now - (i % 3600) * 1000,
      query_id: `q-${i % 200}`,
      query_text: 'rate limit headers',
      results_count: i % 7,
      time_to_success_ms: i % 5 === 0 ? 1000 + i : 0,
      top_results: [{ url: '/docs/a', rank: 1 }],
    })),
  })
  const post = () =>
    fetch(`${address}/api/v1/telemetry/docs-search/batch`, { method: 'POST', body: batch, headers: { 'content-type': 'application/json', 'x-api-key': 'bench' } }).then(async (r) => {
      if (r.status !== 202) throw new Error(`ingest answered ${r.status}`)
      await r.arrayBuffer()
    })
  for (let i = 0; i < 20; i++) await post() // warm-up
  let next = 0
  const started = performance.now()
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next++ < BATCHES) await post()
  }))
  const seconds = (performance.now() - started) / 1000
  const ingestRate = Math.round((BATCHES * 500) / seconds)

  const [{ n }] = (await sql`select count(*)::int as n from docs_search_events`) as unknown as [{ n: number }]
  await sql`
    insert into docs_search_events (event, emitted_at_ms, query_id, results_count, time_to_success_ms)
    select case when i % 3 = 0 then 'search_result_click' else 'search_query' end,
           ${now}::bigint - (i % 86400) * 1000, 'q-' || (i % 50000), i % 7, case when i % 5 = 0 then 1000 + i % 9000 else 0 end
    from generate_series(1, ${Math.max(0, TOTAL_EVENTS - n)}) as i`
  await sql`vacuum analyze docs_search_events`
  const timings: number[] = []
  for (let i = 0; i < 7; i++) {
    const t0 = performance.now()
    const r = await fetch(`${address}/api/v1/telemetry/docs-search/metrics?window_minutes=10080`, { headers: { 'x-api-key': 'bench' } })
    if (r.status !== 200) throw new Error(`metrics answered ${r.status}`)
    await r.json()
    timings.push(performance.now() - t0)
  }
  timings.sort((a, b) => a - b)
  await app.close()
  console.log(`batch ingest: ${BATCHES} batches x 500 events, ${CONCURRENCY} concurrent: ${ingestRate} events/s (${seconds.toFixed(2)} s)`)
  console.log(`metrics over ${TOTAL_EVENTS} events (window covers all): median ${timings[3]!.toFixed(0)} ms, min ${timings[0]!.toFixed(0)} ms, max ${timings[6]!.toFixed(0)} ms`)
} finally {
  await sql.end()
  await admin.unsafe(`drop database if exists "${name}" with (force)`)
  await admin.end()
}

// Telemetry figures: batch ingest throughput (events/s over HTTP) and the metrics query time
// over 10M stored events (bench/telemetry-seed.ts). A benchmark, not a test: `make bench-telemetry`.
// BENCH_EVENTS=0 measures ingest only (the before/after comparison of a rollup change).
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'
import { createClient } from '../src/db/client.js'
import { migrate } from '../src/db/migrate.js'
import { ADMIN_URL, databaseUrl } from '../test/helpers/database.js'
import { METRICS_TARGETS_MS, METRICS_WINDOWS, seedDocsSearch, TELEMETRY_SHAPE } from './telemetry-seed.js'

const BATCHES = Number(process.env.BENCH_BATCHES ?? 400)
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8)
const SEED = process.env.BENCH_EVENTS !== '0'

const name = `bench_telemetry_${randomBytes(3).toString('hex')}`
const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
await admin.unsafe(`create database "${name}"`)
const sql = createClient(databaseUrl(name), { max: 10 })
const bulk = postgres(databaseUrl(name), { max: 1, onnotice: () => {} }) // no statement_timeout: the seed outlasts it
try {
  await migrate(sql)
  // No load shedding: this process is also the client, and its own event-loop delay is not overload.
  const app = await buildApp({ config: loadConfig({ API_KEYS: 'bench', LOG_LEVEL: 'silent', RATE_LIMIT_MAX: '10000000', LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0' }), sql, logger: false })
  const address = await app.listen({ port: 0, host: '127.0.0.1' })
  const now = Date.now()
  // Two shapes: every batch reusing the same 200 query ids (the rollup rows contended by every
  // batch), and each batch with query ids of its own (a browser's searches: the usual case).
  const batch = (ids: (i: number) => string) =>
    JSON.stringify({
      events: Array.from({ length: 500 }, (_, i) => ({
        event: i % 3 === 0 ? 'search_result_click' : 'search_query',
        emitted_at_ms: now - (i % 3600) * 1000,
        query_id: ids(i),
        query_text: 'rate limit headers',
        results_count: i % 7,
        time_to_success_ms: i % 5 === 0 ? 1000 + i : 0,
        top_results: [{ url: '/docs/a', rank: 1 }],
      })),
    })
  const post = (body: string) =>
    fetch(`${address}/api/v1/telemetry/docs-search/batch`, { method: 'POST', body, headers: { 'content-type': 'application/json', 'x-api-key': 'bench' } }).then(async (r) => {
      if (r.status !== 202) throw new Error(`ingest answered ${r.status}`)
      await r.arrayBuffer()
    })
  let browser = 0
  const shapes: [string, () => string][] = [
    ['shared query ids', () => batch((i) => `q-${i % 200}`)],
    ['own query ids', () => batch((i) => `b${browser++}-q${i % 200}`)],
  ]
  for (const [label, next] of shapes) {
    for (let i = 0; i < 20; i++) await post(next()) // warm-up
    let sent = 0
    const started = performance.now()
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (sent++ < BATCHES) await post(next())
    }))
    const seconds = (performance.now() - started) / 1000
    console.log(`batch ingest, ${label}: ${BATCHES} batches x 500 events, ${CONCURRENCY} concurrent: ${Math.round((BATCHES * 500) / seconds)} events/s (${seconds.toFixed(2)} s)`)
  }

  if (SEED) {
    await sql`truncate docs_search_events, docs_search_queries`
    const seeded = await seedDocsSearch(bulk, Date.now())
    console.log(`seeded ${TELEMETRY_SHAPE} in ${seeded.seconds.toFixed(0)} s`)
    for (const window of METRICS_WINDOWS) {
      const timings: number[] = []
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now()
        const r = await fetch(`${address}/api/v1/telemetry/docs-search/metrics?window_minutes=${window}`, { headers: { 'x-api-key': 'bench' } })
        if (r.status !== 200) throw new Error(`metrics answered ${r.status}`)
        await r.json()
        if (i > 0) timings.push(performance.now() - t0) // the first is a warm-up
      }
      timings.sort((a, b) => a - b)
      const median = timings[2]!
      const target = METRICS_TARGETS_MS[window]
      console.log(`metrics, window ${window} min: median ${median.toFixed(0)} ms (${timings[0]!.toFixed(0)}–${timings[3]!.toFixed(0)})${target ? `, target ≤ ${target} ms` : ''}`)
    }
  }
  await app.close()
} finally {
  await sql.end()
  await bulk.end()
  await admin.unsafe(`drop database if exists "${name}" with (force)`)
  await admin.end()
}

// `make bench-ingest`: telemetry ingest with the docs-search analytics rollup against ingest
// without it, in one run on the same data. A is the service as shipped: the rollup's statement
// trigger on every batch, and the service's refresh every ANALYTICS_REFRESH_INTERVAL_MS (default).
// B has the trigger dropped on its database and the interval at its maximum, an hour (its start's
// refresh finds nothing). Every round runs on a fresh copy of one seeded database; the pairs
// alternate A, B and B, A; the ratio is the median of the pairs' events/s A / B. Where the rest goes: pg_stat_activity sampled during each round (the
// ingest backends' wait events and the relations of their row locks; whether a refresh statement
// ran), and PostgreSQL's CPU per event (the round database's backends, from /proc), counted until
// the rollup holds the round's events. How to read it: docs/performance.md.
import { setTimeout as sleep } from 'node:timers/promises'
import type postgres from 'postgres'
import { refreshAnalyticsRollup, SLICES_PER_REFRESH } from '../src/repositories/telemetry-analytics-rollup.js'
import { AnalyticsRollup } from '../src/telemetry/analytics-rollup.js'
import * as h from './harness.js'
import { ingestBatch } from './requests.js'
import { writeResults } from './results-file.js'
import { seedDocsSearch, TELEMETRY_SHAPE } from './telemetry-seed.js'
import { NOW_MS, runWrk, UNIQUE_ID } from './wrk.js'

const [DURATION, WARMUP] = [h.setting('DURATION', 300), h.setting('WARMUP', 10)]
const [RUNS, CONNECTIONS] = [h.setting('RUNS', 3), h.setting('CONNECTIONS', 50)]
const [TARGET, SAMPLE_MS, PER_BATCH] = [0.8, 100, 500]
const list = Array.from({ length: 8 }, (_, variant) => ingestBatch(variant, UNIQUE_ID, NOW_MS))
const sum = h.sum
const tally = (into: Map<string, number>, key: string, n = 1) => into.set(key, (into.get(key) ?? 0) + n)

/** CPU ticks so far of each backend on the database (one that exits during a round takes its ticks along). */
async function backendTicks(sql: postgres.Sql): Promise<Map<number, number>> {
  const [ticks, rows] = [
    new Map<number, number>(),
    await sql`select pid from pg_stat_activity where datname = current_database()`,
  ]
  for (const { pid } of rows) {
    try {
      ticks.set(pid, h.cpuTicks(pid))
    } catch {} // exited meanwhile
  }
  return ticks
}

async function round(template: h.BenchDatabase, side: 'A' | 'B') {
  const db = await template.copy()
  try {
    if (side === 'B') await db.sql`drop trigger docs_search_analytics_touch on docs_search_events`
    const off = { ANALYTICS_REFRESH_INTERVAL_MS: '3600000' }
    const service = await h.startService(db.url, 3611, undefined, '', side === 'B' ? off : {})
    try {
      await runWrk(service.base, CONNECTIONS, WARMUP, list)
      // pg_stat_activity samples: taken, with a refresh running; the ingest backends' waits and row locks
      const seen = { samples: 0, refreshing: 0, waits: new Map<string, number>(), rowLocks: new Map<string, number>() }
      let sampling = true
      const sampler = (async () => {
        for (; sampling; await sleep(SAMPLE_MS)) {
          const rows = await db.sql<{ wait: string; refresh: boolean; row_lock: string | null }[]>`
            select coalesce(a.wait_event_type || ': ' || a.wait_event, 'none (on CPU or runnable)') as wait,
                   a.query like '%docs_search_analytics_%' as refresh,
                   (select l.relation::regclass::text from pg_locks l where l.pid = a.pid and l.locktype = 'tuple' limit 1) as row_lock
            from pg_stat_activity a
            where a.datname = current_database() and a.state = 'active' and a.pid <> pg_backend_pid()`
          seen.samples++
          if (rows.some((x) => x.refresh)) seen.refreshing++
          for (const x of rows.filter((x) => !x.refresh)) {
            tally(seen.waits, x.wait)
            if (x.row_lock) tally(seen.rowLocks, x.row_lock)
          }
        }
      })()
      const [pg0, core0, t0] = [await backendTicks(db.sql), h.coreTicks(h.SERVER_CPU), performance.now()]
      const w = await runWrk(service.base, CONNECTIONS, DURATION, list)
      const [core1, t1] = [h.coreTicks(h.SERVER_CPU), performance.now()]
      sampling = false
      await sampler
      // The events staged since the service's last refresh: merged now by the service's code, after
      // the refresh under way (the lock), so that CPU per event counts every event's refresh.
      const rollup = new AnalyticsRollup({ sql: db.sql } as never)
      while (!(await rollup.refresh())) await sleep(SAMPLE_MS)
      const pg1 = await backendTicks(db.sql)
      // tail: seconds after the round until the rollup held its events. Accepted events only: a
      // batch shed (503) or failed stored nothing.
      const [tail, events] = [(performance.now() - t1) / 1000, (w.total - w.bad) * PER_BATCH]
      const pgTicks = sum([...pg1].map(([pid, ticks]) => ticks - (pg0.get(pid) ?? 0)))
      const pgBusy = (pgTicks * h.US_PER_TICK) / ((t1 - t0) * 1000 + tail * 1e6)
      const serverBusy = h.busyShare(core0, core1)
      const r = { ...seen, ...w, tail, events, eventsPerS: (w.rps * events) / w.total, pgTicks, pgBusy, serverBusy }
      console.log(
        `${side}: ${Math.round(r.eventsPerS)} events/s, p99 ${w.p99.toFixed(0)} ms, tail ${tail.toFixed(1)} s`,
      )
      return r
    } finally {
      await h.stopServers()
    }
  } finally {
    await db.drop()
  }
}

const template = await h.createBenchDatabase('ingest')
try {
  template.setup('node-bound')
  const seeded = await seedDocsSearch(template.sql, Date.now())
  // The analytics of the seeded week, as a service running all week holds them (the seed goes in
  // with the triggers off): every slice logged, then recomputed.
  const t0 = performance.now()
  await template.sql`insert into docs_search_analytics_dirty (slice_ms)
    select distinct (emitted_at_ms / 300000) * 300000 from docs_search_events where event in ('search_query', 'search_result_click')`
  while ((await refreshAnalyticsRollup(template.sql as never)).logged >= SLICES_PER_REFRESH) {}
  const analyticsS = (performance.now() - t0) / 1000
  console.log(`seeded ${seeded.events} events in ${seeded.seconds.toFixed(0)} s; analytics: ${analyticsS.toFixed(0)} s`)
  await template.settle()
  await template.sql.end() // a copy needs the template without sessions

  const pairs = await h.alternate(
    RUNS,
    () => round(template, 'A'),
    () => round(template, 'B'),
  )

  type Round = (typeof pairs)[number]['a']
  const ratios = pairs.map((p) => p.a.eventsPerS / p.b.eventsPerS)
  const ratio = h.median(ratios)
  const pct = (x: number) => `${(x * 100).toFixed(0)} %`
  const pgPerEvent = (rs: Round[]) =>
    (sum(rs.map((r) => r.pgTicks)) * h.US_PER_TICK) / Math.max(1, sum(rs.map((r) => r.events)))
  const shares = (rs: Round[], key: 'waits' | 'rowLocks', n: number) => {
    const all = new Map<string, number>()
    for (const r of rs) for (const [k, count] of r[key]) tally(all, k, count)
    const [total, top] = [Math.max(1, sum([...all.values()])), [...all].sort((p, q) => q[1] - p[1]).slice(0, n)]
    return top.map(([k, count]) => `${k} ${pct(count / total)}`).join(', ') || 'none'
  }
  const side = (name: string, rs: Round[]) => {
    const m = (f: (r: Round) => number) => h.median(rs.map(f))
    const samples = sum(rs.map((r) => r.samples))
    const waits = rs.flatMap((r) => [...r.waits])
    const lock =
      sum(waits.filter(([k]) => k.startsWith('Lock:')).map(([, n]) => n)) / Math.max(1, sum(waits.map(([, n]) => n)))
    return `| ${name} | ${Math.round(m((r) => r.eventsPerS))} | ${m((r) => r.p50).toFixed(0)} / ${m((r) => r.p99).toFixed(0)} | ${pgPerEvent(rs).toFixed(1)} | ${pct(m((r) => r.pgBusy))} | ${pct(m((r) => r.serverBusy))} | ${(sum(waits.map(([, n]) => n)) / samples).toFixed(1)} | ${pct(lock)} | ${shares(rs, 'waits', 4)} | ${shares(rs, 'rowLocks', 2)} | ${pct(sum(rs.map((r) => r.refreshing)) / samples)} | ${m((r) => r.tail).toFixed(1)} | ${sum(rs.map((r) => r.bad))} |`
  }
  const [as, bs] = [pairs.map((p) => p.a), pairs.map((p) => p.b)]
  const extra = pgPerEvent(as) - pgPerEvent(bs)
  const body = [
    `Telemetry batches of ${PER_BATCH} events (bench/requests.ts ingestBatch: each its own Idempotency-Key, emitted when sent) over ${CONNECTIONS} connections,`,
    `driven by wrk, on a database seeded with ${TELEMETRY_SHAPE} and their analytics (${analyticsS.toFixed(0)} s), a fresh copy each round.`,
    `A: the service as shipped (analytics trigger on, refresh every ANALYTICS_REFRESH_INTERVAL_MS, default); B: trigger dropped,`,
    `ANALYTICS_REFRESH_INTERVAL_MS=3600000. ${RUNS} pairs of ${DURATION} s rounds after ${WARMUP} s of warm-up each (A, B then B, A). The service on`,
    `core ${h.SERVER_CPU}, PostgreSQL ${template.postgresPinned ? `on core ${h.LOAD_CPU} with wrk` : 'on both cores (could not be pinned)'}.`,
    ``,
    `**events/s A / B: ${ratio.toFixed(2)}** (pairs: ${ratios.map((x) => x.toFixed(2)).join(', ')}); target ≥ ${TARGET.toFixed(2)}: ${ratio >= TARGET ? 'met' : '**not met**'}.`,
    `PostgreSQL CPU per event B / A: ${(pgPerEvent(bs) / pgPerEvent(as)).toFixed(2)} (the ratio where PostgreSQL's core is the limit); A − B: ${extra.toFixed(1)} µs (${pct(extra / pgPerEvent(bs))} of B's), the trigger's and the refresh's.`,
    ``,
    `| side | events/s | batch p50 / p99 ms | PostgreSQL CPU µs/event | PostgreSQL busy | service core busy | active backends | Lock waits | top wait events | row locks on | refresh running | tail s | non-2xx |`,
    `|---|---|---|---|---|---|---|---|---|---|---|---|---|`,
    side('A (rollup on)', as),
    side('B (rollup off)', bs),
    ``,
    `Medians of the rounds, except: CPU per event, the round database's backends' CPU over the events, counted until the rollup held`,
    `them (tail: the refresh under way at the end, then one more); pg_stat_activity sampled every ${SAMPLE_MS} ms: active backends (mean), the`,
    `ingest backends' wait events and the tables of their row locks (shares of their samples), refresh running (share of samples).`,
  ].join('\n')
  console.log(`\n${body}`)
  const settings = Object.entries(process.env).filter(([k]) => k.startsWith('BENCH_'))
  const command = [...settings.map(([k, v]) => `${k}=${v}`), 'make bench-ingest'].join(' ')
  const title = 'Telemetry ingest, analytics rollup on / off (make bench-ingest)'
  writeResults('ingest', title, command, `${body}\n\nAnalysis: docs/performance.md.`)
} finally {
  await h.stopServers()
  await template.drop()
}

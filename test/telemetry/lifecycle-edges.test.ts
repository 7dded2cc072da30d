// The events' lifecycle at its edges, each on a database of its own: the replicas' lock, a closed
// day vacuumed once, the horizon and the retention limit falling exactly on a day's end, a day
// archived already whose partition came back, DDL that keeps giving way to a lock, and the table
// names that may go into DDL. The lifecycle runs as the service runs it (TelemetryLifecycle on a
// pool), against real PostgreSQL.
import t, { type Test } from 'tap'
import { Writable } from 'node:stream'
import pino from 'pino'
import postgres from 'postgres'
import type { Db, Sql } from '../../src/db/client.js'
import {
  archiveName,
  archiveNames,
  countRowsStatement,
  createTelemetryLifecycleRepository,
  partitionName,
} from '../../src/repositories/telemetry-lifecycle.js'
import { TelemetryLifecycle, type LifecycleOptions } from '../../src/telemetry/lifecycle.js'
import { createTestDatabase } from '../helpers/database.js'
import { waitFor } from '../helpers/wait.js'

const DAY = 86_400_000
const MIDNIGHT = Date.UTC(2026, 10, 22) // a day's start: the horizon and the limit fall on day ends
const LOCK_ID = 7_346_110_233 // the replicas' advisory lock (src/telemetry/lifecycle.ts)

/** A lifecycle over a fresh database, its clock set by the test, its log lines kept. */
async function lifecycleOn(t: Test, options: Partial<LifecycleOptions> = {}, wrap = (sql: Db) => sql) {
  const db = await createTestDatabase(t)
  let now = MIDNIGHT
  const lines: Record<string, unknown>[] = []
  const log = pino(
    { level: 'info' },
    new Writable({
      write(chunk, _enc, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line))
        done()
      },
    }),
  )
  const sql = db.sql
  const lifecycle = new TelemetryLifecycle({ sql: { reserve: async () => wrap(await sql.reserve()) } } as never, {
    retentionDays: 8,
    now: () => new Date(now),
    log: log as never,
    ...options,
  })
  t.teardown(() => lifecycle.settled())
  const partitions = async () =>
    (
      await sql`select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid
                where i.inhparent = 'docs_search_events'::regclass order by 1`
    ).map((r) => r.relname as string)
  /** Runs as the hourly timer would have, once a day from `from` to `to`. */
  const liveDays = async (from: number, to: number) => {
    for (let at = from; at <= to; at += DAY) {
      now = at
      t.ok(await lifecycle.run(), `run at ${new Date(at).toISOString()}`)
    }
  }
  return { sql, url: db.url, lifecycle, lines, partitions, liveDays, setNow: (ms: number) => (now = ms) }
}

t.test("while another replica holds the lifecycle's lock a run does nothing; a run frees it after", async (t) => {
  const { url, lifecycle, partitions } = await lifecycleOn(t)
  const other = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(() => other.end())
  const before = await partitions()
  await other.reserve().then(async (holder) => {
    await holder`select pg_advisory_lock(${LOCK_ID})`
    t.equal(await lifecycle.run(), false, 'the run gives way')
    t.same(await partitions(), before, 'and makes no partition')
    t.equal(lifecycle.figures.lastRunMs, null, 'nor counts as a run')
    await holder`select pg_advisory_unlock(${LOCK_ID})`
    holder.release()
  })
  let finished = false
  void lifecycle.run().then(() => (finished = true))
  await lifecycle.settled()
  t.equal(finished, true, 'settled() waits for the run under way')
  t.ok((await partitions()).includes(partitionName(MIDNIGHT)), "today's partition made")
  t.equal(lifecycle.figures.oldestEventMs, null, 'no event kept, none archived')
  const [free] = await other`select pg_try_advisory_lock(${LOCK_ID}) as locked`
  t.equal(free!.locked, true, 'the run let go of the lock: another replica takes it')
  await other`select pg_advisory_unlock(${LOCK_ID})`
})

t.test('a closed day is vacuumed once, and again only after new events', async (t) => {
  const { sql, lifecycle, setNow } = await lifecycleOn(t)
  setNow(MIDNIGHT + 6 * 3_600_000)
  t.ok(await lifecycle.run())
  const yesterday = partitionName(MIDNIGHT - DAY)
  const today = partitionName(MIDNIGHT)
  const stats = async (name = yesterday) =>
    (
      await sql`select n_ins_since_vacuum::int as pending, vacuum_count::int as vacuums
                from pg_stat_user_tables where relname = ${name}`
    )[0] as { pending: number; vacuums: number }
  const insert = async (ms: number, name: string) => {
    await sql`insert into docs_search_events (event, emitted_at_ms) values ('search_query', ${ms})`
    // The insert reaches the statistics about a second after its transaction.
    await waitFor('the insert in the statistics', async () => (await stats(name)).pending > 0)
  }
  const insertYesterday = () => insert(MIDNIGHT - 3_600_000, yesterday)
  await insertYesterday()
  await insert(MIDNIGHT + 3_600_000, today)
  const first = (await stats()).vacuums
  const todayFirst = (await stats(today)).vacuums
  t.ok(await lifecycle.run())
  t.equal((await stats()).vacuums, first + 1, 'vacuumed once closed')
  t.ok(await lifecycle.run())
  t.equal((await stats()).vacuums, first + 1, 'not again without new events')
  await insertYesterday()
  t.ok(await lifecycle.run())
  t.equal((await stats()).vacuums, first + 2, 'again after a late event')
  t.equal((await stats(today)).vacuums, todayFirst, 'today, still written, never')
})

t.test('a day ending exactly at the KPI horizon is archived; one ending exactly at the limit goes', async (t) => {
  const { sql, lifecycle, lines, partitions, liveDays } = await lifecycleOn(t)
  const archives = () => archiveNames(sql)
  // At each midnight the horizon (7 days back) is the end of a day, and so is the limit (8 days).
  const started = performance.now()
  await liveDays(MIDNIGHT - 12 * DAY, MIDNIGHT)
  const elapsed = performance.now() - started
  const drops = lines.filter((l) => l.msg === 'telemetry: partition dropped by retention')
  t.same(
    drops.map((l) => [l.level, l.partition, l.rows]),
    [13, 12, 11, 10, 9].map((back) => MIDNIGHT - back * DAY).map((day) => [30, archiveName(day), 0]),
    'each drop logged at info with its table and rows',
  )
  for (const l of drops) t.ok((l.ms as number) >= 0 && (l.ms as number) <= elapsed, `its duration (${l.ms} ms)`)
  t.same(await archives(), [archiveName(MIDNIGHT - 8 * DAY)], 'the day that ended at the horizon is archived')
  const names = await partitions()
  t.notOk(names.includes(partitionName(MIDNIGHT - 8 * DAY)), 'and is no longer a partition')
  t.ok(names.includes(partitionName(MIDNIGHT - 7 * DAY)), 'the next day, inside every window, stays')
  t.notOk(names.includes(partitionName(MIDNIGHT - 9 * DAY)), 'the day that ended at the limit is dropped')
  t.equal(lifecycle.figures.oldestEventMs, MIDNIGHT - 8 * DAY, 'the oldest kept: the archived day, from its start')
  const dropped = lifecycle.figures.partitionsDropped
  t.ok(dropped > 0)
  // An hour before the next midnight nothing more is past either line.
  await liveDays(MIDNIGHT + DAY - 3_600_000, MIDNIGHT + DAY - 3_600_000)
  t.same(await archives(), [archiveName(MIDNIGHT - 8 * DAY)])
  t.equal(lifecycle.figures.partitionsDropped, dropped)
  // At midnight the archived day ends at the limit and goes; the next day is archived.
  await liveDays(MIDNIGHT + DAY, MIDNIGHT + DAY)
  t.same(await archives(), [archiveName(MIDNIGHT - 7 * DAY)])
  t.equal(lifecycle.figures.partitionsDropped, dropped + 1, 'the archive dropped by retention')
})

t.test('a day archived already whose partition came back stays a partition until retention', async (t) => {
  const { sql, partitions, liveDays } = await lifecycleOn(t)
  const day = MIDNIGHT - 8 * DAY
  await liveDays(MIDNIGHT - 9 * DAY, MIDNIGHT)
  t.same(await archiveNames(sql), [archiveName(day)])
  // The clock went back a week: the day is "yesterday" again and gets a partition anew.
  await liveDays(day + DAY, day + DAY)
  t.ok((await partitions()).includes(partitionName(day)), 'the day is a partition again')
  // Forward again: the day is past the horizon, but its archive exists; the run goes on.
  await liveDays(MIDNIGHT, MIDNIGHT)
  t.same(await archiveNames(sql), [archiveName(day)], 'the archive as it was')
  t.ok((await partitions()).includes(partitionName(day)), 'the partition not archived over it')
  await liveDays(MIDNIGHT + DAY, MIDNIGHT + DAY)
  t.notOk((await partitions()).includes(partitionName(day)), 'retention drops the partition')
  t.same(await archiveNames(sql), [archiveName(day + DAY)], 'and the archive; the next day archived')
})

t.test('DDL that keeps giving way to a lock is tried `attempts` times, logged, and left to the next run', async (t) => {
  let detaches = 0
  // Counts the detach statements the lifecycle sends on its connection (the rest passes through).
  const counting = (sql: Db) =>
    new Proxy(sql, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver)
        if (property !== 'unsafe') return typeof value === 'function' ? value.bind(target) : value
        return (query: string, ...rest: unknown[]) => {
          if (/detach partition/.test(query)) detaches++
          return (value as (...args: unknown[]) => unknown).call(target, query, ...rest)
        }
      },
    })
  const { sql, url, lifecycle, lines, partitions, liveDays } = await lifecycleOn(
    t,
    { attempts: 3, lockTimeoutMs: 1 },
    counting,
  )
  await liveDays(MIDNIGHT, MIDNIGHT)
  // A reader that holds the events' table (the parent alone): a detach waits for it; creating and
  // attaching a partition does not.
  const reader = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(() => reader.end())
  let release!: () => void
  let locked!: () => void
  const held = new Promise<void>((resolve) => (release = resolve))
  const reading = new Promise<void>((resolve) => (locked = resolve))
  const holding = reader.begin(async (tx) => {
    await tx`lock table only docs_search_events in access share mode`
    locked()
    await held
  })
  await reading
  // Nine days on, three days are past the horizon and two of them past the limit too: each
  // archiving, then each drop, detaches a partition, and every detach gives way.
  const later = MIDNIGHT + 9 * DAY + 3_600_000
  const days = [MIDNIGHT - DAY, MIDNIGHT, MIDNIGHT + DAY].map(partitionName)
  detaches = 0
  await liveDays(later, later)
  t.equal(detaches, 5 * 3, 'three tries of each of five detaches')
  t.equal(lifecycle.figures.partitionsArchived, 0, 'nothing archived')
  t.equal(lifecycle.figures.partitionsDropped, 0, 'nothing counted as dropped')
  t.equal(lifecycle.figures.rowsDropped, 0)
  const names = await partitions()
  for (const day of days) t.ok(names.includes(day), `${day} still a partition`)
  t.same(
    lines.filter((l) => l.level === 40).map((l) => [l.attempts, l.msg]),
    [...days.map((day) => `archive partition ${day}`), ...days.slice(0, 2).map((day) => `drop partition ${day}`)].map(
      (what) => [3, `telemetry: ${what} gave way to ingest every time; the next run tries again`],
    ),
  )
  release()
  await holding
  await liveDays(later, later)
  t.equal(lifecycle.figures.partitionsArchived, 3, 'the next run archives them')
  t.equal(lifecycle.figures.partitionsDropped, 2, 'and drops the two past the limit')
  t.same(await archiveNames(sql), [archiveName(MIDNIGHT + DAY)])
})

t.test('DDL waits for its lock up to lockTimeoutMs', async (t) => {
  const { sql, url, lifecycle, lines, liveDays, setNow } = await lifecycleOn(t, { attempts: 1, lockTimeoutMs: 60_000 })
  await liveDays(MIDNIGHT, MIDNIGHT)
  const reader = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(() => reader.end())
  let release!: () => void
  let locked!: () => void
  const held = new Promise<void>((resolve) => (release = resolve))
  const reading = new Promise<void>((resolve) => (locked = resolve))
  const holding = reader.begin(async (tx) => {
    await tx`lock table only docs_search_events in access share mode`
    locked()
    await held
  })
  await reading
  setNow(MIDNIGHT + 7 * DAY + 3_600_000)
  let settled = false
  const run = lifecycle.run().finally(() => (settled = true))
  await waitFor(
    'the detach to wait for its lock (or the run to end)',
    async () =>
      settled ||
      (
        await sql`select 1 from pg_locks
                  where relation = 'docs_search_events'::regclass and mode = 'AccessExclusiveLock' and not granted`
      ).length > 0,
    { everyMs: 5 },
  )
  t.equal(settled, false, 'the run waits on its one try')
  // Once the database has seen it wait a second (far inside its 60 s), it still waits; a short
  // lock timeout would have ended the run (or the wait) first.
  await waitFor(
    'the detach to have waited a second (or the run to end)',
    async () =>
      settled ||
      (
        await sql`select 1 from pg_locks l join pg_stat_activity a using (pid)
                  where l.relation = 'docs_search_events'::regclass and l.mode = 'AccessExclusiveLock' and not l.granted
                    and clock_timestamp() - a.query_start >= interval '1 second'`
      ).length > 0,
    { everyMs: 50 },
  )
  t.equal(settled, false, 'and still waits a second later')
  release()
  await holding
  t.equal(await run, true)
  t.equal(lifecycle.figures.partitionsArchived, 1, 'and archives the day once the lock is free')
  t.same(
    lines.filter((l) => l.level === 40),
    [],
  )
})

t.test('only partition and archive names go into DDL', async (t) => {
  const ok = [partitionName(MIDNIGHT), archiveName(MIDNIGHT), `docs_search_events_${'a'.repeat(40)}`]
  for (const name of ok) t.equal(countRowsStatement(name), `select count(*) as n from "${name}"`, name)
  const refused = [
    'users',
    'docs_search_events',
    'docs_search_events_',
    `docs_search_events_${'a'.repeat(41)}`,
    'docs_search_events_2026Nov',
    'docs_search_other_20261122',
    `x${partitionName(MIDNIGHT)}`,
    `${partitionName(MIDNIGHT)}"; drop table users; --`,
    `${partitionName(MIDNIGHT)}\n`,
  ]
  for (const name of refused)
    t.throws(() => countRowsStatement(name), {
      message: `not a docs_search_events partition or archive name: ${name}`,
    })
})

t.test('an error other than a lock timeout is not retried: the run fails with it', async (t) => {
  const { sql, lifecycle, lines, setNow } = await lifecycleOn(t)
  // A table in the way of the partition the run makes for two days ahead.
  const inTheWay = partitionName(MIDNIGHT + 2 * DAY)
  await sql.unsafe(`create table ${inTheWay} (id int)`)
  setNow(MIDNIGHT + 3_600_000)
  await t.rejects(lifecycle.run(), { code: '42P07' })
  t.same(
    lines.filter((l) => l.level === 40),
    [],
    'no retry given up on',
  )
})

t.test("the statements that change a session setting put it back on the lifecycle's connection", async (t) => {
  const { sql, lifecycle, setNow } = await lifecycleOn(t)
  setNow(MIDNIGHT + 3_600_000)
  t.ok(await lifecycle.run())
  const today = partitionName(MIDNIGHT)
  await sql.unsafe(`insert into ${today} (event, emitted_at_ms, session_id)
                    select 'search_query', ${MIDNIGHT} + i, 's' || i from generate_series(1, 50) i`)
  await sql.unsafe(`vacuum analyze ${today}`)
  const settings = async (on: Db) =>
    (await on`select current_setting('enable_seqscan') as seqscan, current_setting('statement_timeout') as timeout`)[0]
  const before = await settings(sql)
  t.same(before, { seqscan: 'on', timeout: '15s' })
  // The count's own scans of the day: this backend's counts (pg_stat_xact_*, not yet flushed to
  // the statistics) before and after it, in one transaction, so that nothing is flushed between.
  await sql.begin(async (tx) => {
    const scans = async () =>
      (
        await tx`select seq_scan::int as seq, idx_scan::int as idx from pg_stat_xact_user_tables where relname = ${today}`
      )[0]!
    const from = await scans()
    t.equal(await createTelemetryLifecycleRepository(tx as never).countRows(today), 50)
    const to = await scans()
    t.same(
      { seq: to.seq - from.seq, idx: to.idx - from.idx },
      { seq: 0, idx: 1 },
      'the count read an index, not the table',
    )
    t.same(await settings(tx as never), before, 'after counting a day')
  })
  const connection = await sql.reserve()
  t.teardown(() => connection.release())
  const repo = createTelemetryLifecycleRepository(connection)
  await repo.vacuumDay(today)
  t.same(await settings(connection), before, 'after vacuuming a day')
  await repo.addSessionIndex(today)
  t.same(await settings(connection), before, 'after adding a session index')
})

t.test(
  "the previous release's table (all times before a day) is not archived, and goes whole at the limit",
  async (t) => {
    const { sql, partitions, liveDays } = await lifecycleOn(t, { retentionDays: 30 })
    const legacy = 'docs_search_events_before_days'
    await sql.unsafe(`create table ${legacy} (like docs_search_events including defaults)`)
    await sql.unsafe(
      `alter table docs_search_events attach partition ${legacy} for values from (minvalue) to (${MIDNIGHT - 10 * DAY})`,
    )
    await liveDays(MIDNIGHT, MIDNIGHT)
    t.ok((await partitions()).includes(legacy), 'still a partition past the KPI horizon')
    t.same(await archiveNames(sql), [], 'not archived')
    const [index] =
      await sql`select indisvalid as valid from pg_index where indexrelid = ${`${legacy}_session`}::regclass`
    t.same(index, { valid: true }, 'it got its session index')
    for (const day of [-1, 0, 1, 2]) t.ok((await partitions()).includes(partitionName(MIDNIGHT + day * DAY)))
    // Twenty-one days on, its end is past the 30-day limit.
    await liveDays(MIDNIGHT + 21 * DAY, MIDNIGHT + 21 * DAY)
    t.notOk((await partitions()).includes(legacy), 'dropped by retention')
    t.same(
      await archiveNames(sql),
      [-1, 0, 1, 2].map((day) => archiveName(MIDNIGHT + day * DAY)),
      'only the days were archived',
    )
  },
)

t.test('the DEFAULT events and the unreachable rollups are deleted in batches until none is left', async (t) => {
  const { sql } = await lifecycleOn(t)
  const repo = createTelemetryLifecycleRepository(sql)
  // Times with no partition: the DEFAULT partition holds them.
  await sql`insert into docs_search_events (event, emitted_at_ms)
            select 'search_query', ms from unnest(${[1000, 1001, 1002, 1003, 1004, 20_000]}::bigint[]) ms`
  t.equal(await repo.deleteDefaultBefore(10_000, 2), 5)
  t.same(
    (await sql`select emitted_at_ms::int as ms from docs_search_events_default`).map((r) => r.ms),
    [20_000],
  )
  t.equal(await repo.oldestEventMs(), 20_000, 'the oldest event kept, no day archived')
  await sql.unsafe(`create table ${archiveName(MIDNIGHT)} (like docs_search_events)`)
  t.equal(await repo.oldestEventMs(), 20_000, 'older than the archived day')
  await sql.unsafe(`delete from docs_search_events`)
  t.equal(await repo.oldestEventMs(), MIDNIGHT, 'the archived day alone')
  const horizon = 1_000_000
  await sql`insert into docs_search_queries (query_id, first_ms, last_ms, queries, zero_result_queries, has_click)
            select 'q' || i, i, case when i > 5 then ${horizon} + i else ${horizon} end, 1, 0, false
            from generate_series(1, 7) i`
  await sql`insert into docs_search_kpi_buckets (hour_ms, band, queries, zero_result_queries, clicked, successes)
            select h, 0, 1, 0, 0, 0 from unnest(${[horizon - 7_200_000, horizon - 3_600_000, horizon, horizon + 3_600_000]}::bigint[]) h`
  await sql`insert into docs_search_kpi_minutes (minute_ms, band, queries, zero_result_queries, clicked, successes)
            select m, 0, 1, 0, 0, 0 from unnest(${[horizon - 60_000, horizon, horizon + 60_000]}::bigint[]) m`
  // The events above were counted into buckets of their own (hour and minute 0), unreachable too.
  const [unreachable] = await sql`select
    (select count(*) from docs_search_kpi_buckets where hour_ms <= ${horizon})::int
      + (select count(*) from docs_search_kpi_minutes where minute_ms <= ${horizon})::int as n`
  t.ok(unreachable!.n >= 3 + 2)
  t.same(await repo.deleteUnreachableRollups(horizon, 2), { queries: 5, buckets: unreachable!.n })
  t.same(
    (await sql`select query_id from docs_search_queries order by 1`).map((r) => r.query_id),
    ['q6', 'q7'],
    'a query whose last event is after the horizon is kept',
  )
  const [left] = await sql`select (select count(*) from docs_search_kpi_buckets)::int as hours,
                                  (select count(*) from docs_search_kpi_minutes)::int as minutes`
  t.same(left, { hours: 1, minutes: 1 }, 'the buckets after the horizon are kept')
})

t.test('creating a partition gives way to a lock too, and the next run makes it', async (t) => {
  const { url, lines, partitions, liveDays } = await lifecycleOn(t, { attempts: 1, lockTimeoutMs: 1 })
  // SHARE on the events' table: attaching a partition waits for it.
  const reader = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(() => reader.end())
  let release!: () => void
  let locked!: () => void
  const held = new Promise<void>((resolve) => (release = resolve))
  const reading = new Promise<void>((resolve) => (locked = resolve))
  const holding = reader.begin(async (tx) => {
    await tx`lock table only docs_search_events in share mode`
    locked()
    await held
  })
  await reading
  await liveDays(MIDNIGHT, MIDNIGHT)
  const days = [-1, 0, 1, 2].map((day) => partitionName(MIDNIGHT + day * DAY))
  t.same(
    lines.filter((l) => l.level === 40).map((l) => l.msg),
    days.map((day) => `telemetry: create partition ${day} gave way to ingest every time; the next run tries again`),
  )
  for (const day of days) t.notOk((await partitions()).includes(day))
  release()
  await holding
  await liveDays(MIDNIGHT, MIDNIGHT)
  for (const day of days) t.ok((await partitions()).includes(day), `${day} made by the next run`)
})

t.test("a day's vacuum and a session index build run without the pool's statement timeout", async (t) => {
  const { sql } = await lifecycleOn(t)
  const connection = await sql.reserve()
  t.teardown(() => connection.release())
  const repo = createTelemetryLifecycleRepository(connection)
  // A day table with enough rows that neither statement ends within 1 ms.
  const day = partitionName(MIDNIGHT + 30 * DAY)
  await connection.unsafe(`create table ${day} (like docs_search_events including defaults)`)
  await connection.unsafe(`insert into ${day} (event, emitted_at_ms, session_id)
                           select 'search_query', ${MIDNIGHT + 30 * DAY} + i, 's' || (i % 997) from generate_series(1, 50000) i`)
  await connection`set statement_timeout = 1`
  await repo.vacuumDay(day)
  await connection`set statement_timeout = 1`
  await repo.addSessionIndex(day)
  const [index] =
    await connection`select indisvalid as valid from pg_index where indexrelid = ${`${day}_session`}::regclass`
  t.same(index, { valid: true }, 'the index built')
})

/** Cancels the lifecycle's CREATE INDEX CONCURRENTLY once it waits for an older snapshot (held by `holder`). */
async function cancelIndexBuild(t: Test, sql: Sql, url: string, run: () => Promise<boolean>) {
  const holder = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(() => holder.end())
  let release!: () => void
  let holding!: () => void
  const held = new Promise<void>((resolve) => (release = resolve))
  const snapshot = new Promise<void>((resolve) => (holding = resolve))
  const open = holder.begin('isolation level repeatable read', async (tx) => {
    await tx`select 1`
    holding()
    await held
  })
  await snapshot
  const running = run()
  const [build] = await waitFor('the index build to wait for the older snapshot', async () => {
    const rows = await sql`select pid from pg_stat_activity
                           where query ilike 'create index concurrently%' and wait_event_type = 'Lock'`
    return rows.length > 0 ? rows : undefined
  })
  await sql`select pg_cancel_backend(${build!.pid})`
  const result = await running
  release()
  await open
  return result
}

t.test('a session index build that fails is logged and the run goes on', async (t) => {
  const { sql, url, lifecycle, lines, partitions, setNow } = await lifecycleOn(t)
  const legacy = 'docs_search_events_before_days'
  await sql.unsafe(`create table ${legacy} (like docs_search_events including defaults)`)
  await sql.unsafe(
    `alter table docs_search_events attach partition ${legacy} for values from (minvalue) to (${MIDNIGHT - 10 * DAY})`,
  )
  setNow(MIDNIGHT)
  t.equal(await cancelIndexBuild(t, sql, url, () => lifecycle.run()), true, 'the run completes')
  t.match(
    lines.filter((l) => l.level === 40),
    [{ partition: legacy, msg: 'telemetry: session index not built', err: { code: '57014' } }],
  )
  t.ok((await partitions()).includes(partitionName(MIDNIGHT)), 'the rest of the run happened')
})

t.test('an invalid session index (a build that failed after creating it) is built again, not kept', async (t) => {
  const { sql } = await lifecycleOn(t)
  const day = partitionName(MIDNIGHT)
  await sql.unsafe(
    `create table ${day} partition of docs_search_events for values from (${MIDNIGHT}) to (${MIDNIGHT + DAY})`,
  )
  await sql.unsafe(`create index ${day}_session on ${day} (session_id)`)
  // The state a build cancelled or timed out after its catalogue entry leaves behind.
  await sql`update pg_index set indisvalid = false where indexrelid = ${`${day}_session`}::regclass`
  const validity = () =>
    sql<{ valid: boolean }[]>`select indisvalid as valid from pg_index where indexrelid = ${`${day}_session`}::regclass`
  t.same(await validity(), [{ valid: false }], 'an invalid index to begin with')
  const reserved = await sql.reserve()
  try {
    await createTelemetryLifecycleRepository(reserved as never).addSessionIndex(day)
  } finally {
    reserved.release()
  }
  t.same(await validity(), [{ valid: true }], 'the next build replaces it with a valid one')
})

t.test("an archive's session index build that fails is logged and the run goes on", async (t) => {
  const { sql, url, lifecycle, lines, setNow } = await lifecycleOn(t)
  const archive = archiveName(MIDNIGHT - 8 * DAY)
  await sql.unsafe(`create table ${archive} (like docs_search_events including defaults)`)
  setNow(MIDNIGHT)
  t.equal(await cancelIndexBuild(t, sql, url, () => lifecycle.run()), true, 'the run completes')
  t.match(
    lines.filter((l) => l.level === 40),
    [{ archive, msg: 'telemetry: session index not built', err: { code: '57014' } }],
  )
  t.equal(lifecycle.figures.oldestEventMs, MIDNIGHT - 8 * DAY, 'the rest of the run happened')
})

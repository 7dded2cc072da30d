// The events' lifecycle: daily partitions created ahead, the DEFAULT partition for times outside
// them, retention by dropping partitions (KPIs over the kept window unchanged, ingest answered
// while a drop waits), and the figures in /metrics.
import t from 'tap'
import postgres from 'postgres'
import { buildTestApp } from '../helpers/app.js'
import { manualClock } from '../helpers/fixtures.js'
import { REFERENCE_KPIS } from '../helpers/reference-kpis.js'
import { waitFor, within } from '../helpers/wait.js'
import { ConfigError, loadConfig } from '../../src/config.js'
import {
  archiveName,
  archiveNames,
  countRowsStatement,
  createTelemetryLifecycleRepository,
  partitionName,
} from '../../src/repositories/telemetry-lifecycle.js'

interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  'Index Name'?: string
  'Heap Fetches'?: number
  Plans?: PlanNode[]
}
const flatten = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(flatten)]

const DAY = 86_400_000
const HOUR = 3_600_000
const START = '2026-11-22T12:17:31.250Z'
const clock = manualClock(START)
const api = await buildTestApp(t, { TELEMETRY_RETENTION_DAYS: '8' }, { now: clock.now })
const { sql } = api.db
const NOW = Date.parse(START)
const today = Math.floor(NOW / DAY) * DAY

const ingest = async (events: object[]) => {
  const res = await api.request({ method: 'POST', url: '/api/v1/telemetry/docs-search/batch', payload: { events } })
  if (res.statusCode !== 202) throw new Error(`ingest answered ${res.statusCode}`)
}
const partitionOf = async (queryId: string) =>
  (await sql`select tableoid::regclass::text as p from docs_search_events where query_id = ${queryId}`).map(
    (r) => r.p as string,
  )
const partitions = async () =>
  (
    await sql`select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = 'docs_search_events'::regclass order by 1`
  ).map((r) => r.relname as string)
const kpis = async (windowMinutes: number) =>
  (await api.get(`/api/v1/telemetry/docs-search/metrics?window_minutes=${windowMinutes}`)).json()

const archives = () => archiveNames(sql)

/** Events kept before and from `ms`, in the table and in the archived days. */
const keptAround = async (ms: number) => {
  let older = 0
  let kept = 0
  for (const table of ['docs_search_events', ...(await archives())]) {
    const [r] = await sql`select count(*) filter (where emitted_at_ms < ${ms})::int as older,
                                 count(*) filter (where emitted_at_ms >= ${ms})::int as kept from ${sql(table)}`
    older += r!.older as number
    kept += r!.kept as number
  }
  return { older, kept }
}
/** Runs the lifecycle as the hourly timer would have, one day after the other up to `to`. */
const liveDays = async (from: number, to: number) => {
  for (let at = from; at <= to; at += DAY) {
    clock.set(new Date(at).toISOString())
    await api.app.telemetryLifecycle.run()
  }
  clock.set(new Date(to).toISOString())
}

t.test('at start the service has created the partitions of yesterday, today and two days ahead', async (t) => {
  const names = await partitions()
  for (let d = -1; d <= 2; d++) t.ok(names.includes(partitionName(today + d * DAY)), `day ${d}`)
  t.notOk(names.includes(partitionName(today + 3 * DAY)), 'not further ahead')
  t.notOk(names.includes(partitionName(today - 2 * DAY)), 'nor further back')
  t.ok(names.includes('docs_search_events_default'))
  const [session] =
    await sql`select count(*)::int as n from pg_indexes where indexname = ${`${partitionName(today)}_session`}`
  t.equal(session!.n, 1, 'each partition has its session index')
})

t.test('an event far in the past or the future is kept in the DEFAULT partition and counted', async (t) => {
  const future = NOW + 400 * DAY
  await ingest([
    { event: 'search_query', emitted_at_ms: 1, query_id: 'past' },
    { event: 'search_query', emitted_at_ms: future, query_id: 'future', results_count: 0 },
    { event: 'search_query', emitted_at_ms: NOW - 5 * 60_000, query_id: 'now' },
  ])
  t.same(await partitionOf('past'), ['docs_search_events_default'])
  t.same(await partitionOf('future'), ['docs_search_events_default'])
  t.same(await partitionOf('now'), [partitionName(today)])

  // When its day comes, the partition created for it takes the event out of the DEFAULT one, and
  // the KPIs count it.
  clock.set(new Date(future + 60_000).toISOString())
  t.ok(await api.app.telemetryLifecycle.run())
  t.same(await partitionOf('future'), [partitionName(Math.floor(future / DAY) * DAY)])
  t.match(await kpis(60), { total_queries: 1, zero_result_queries: 1 })
  t.same(await partitionOf('past'), [], "retention deleted the DEFAULT partition's event past the limit")
  // Back to the start: the partitions of the kept days again (the far day's stays).
  clock.set(START)
  await api.app.telemetryLifecycle.run()
  await sql`truncate docs_search_events, docs_search_queries`
})

t.test('retention deletes a DEFAULT-partition event exactly when its whole day is past the limit', async (t) => {
  // Retention 8 days: at START the limit is START - 8 days, and the DEFAULT partition keeps every
  // event of the limit's own day. Those days have no partition, so their events are in the DEFAULT one.
  const limitDay = Math.floor((NOW - 8 * DAY) / DAY) * DAY
  await ingest([
    { event: 'search_query', emitted_at_ms: limitDay - 1, query_id: 'day-before-limit' },
    { event: 'search_query', emitted_at_ms: limitDay, query_id: 'limit-day' },
    { event: 'search_query', emitted_at_ms: NOW - 8 * DAY + 1, query_id: 'inside' },
  ])
  for (const q of ['day-before-limit', 'limit-day', 'inside'])
    t.same(await partitionOf(q), ['docs_search_events_default'], `${q} is in the DEFAULT partition`)
  const before = { ...api.app.telemetryLifecycle.figures }
  t.ok(await api.app.telemetryLifecycle.run())
  t.same(await partitionOf('day-before-limit'), [], 'the last millisecond of the day before the limit is deleted')
  t.same(
    await partitionOf('limit-day'),
    ['docs_search_events_default'],
    "the limit's day is kept from its first millisecond",
  )
  t.same(await partitionOf('inside'), ['docs_search_events_default'])
  t.equal(
    api.app.telemetryLifecycle.figures.rowsDropped - before.rowsDropped,
    1,
    'exactly the one event counted as dropped',
  )
  t.equal(api.app.telemetryLifecycle.figures.partitionsDropped, before.partitionsDropped, 'no partition dropped')
  await sql`truncate docs_search_events, docs_search_queries`
})

t.test(
  'past the KPI horizon a day is archived without its KPI indexes; retention drops the days past the limit; no KPI changes',
  async (t) => {
    // 12 days of events, with queries whose events span a day boundary and the edges of the
    // windows, sessions and events without a query id. The older days have no partition yet: the
    // DEFAULT partition takes their events until the runs below make one.
    const events: object[] = []
    for (let h = 0; h < 12 * 24; h += 1) {
      const at = NOW - h * HOUR - 7 * 60_000
      const q = `q${h}`
      events.push({
        event: 'search_query',
        emitted_at_ms: at,
        query_id: q,
        results_count: h % 3,
        session_id: `s${h % 5}`,
      })
      events.push({
        event: 'search_result_click',
        emitted_at_ms: at + 50 * 60_000,
        query_id: q,
        time_to_success_ms: 250 * (h % 40) + 1,
      })
      if (h % 4 === 0)
        events.push({ event: 'search_query', emitted_at_ms: at + 10 * 60_000, query_id: '', results_count: 0 })
    }
    for (let i = 0; i < events.length; i += 500) await ingest(events.slice(i, i + 500))
    const windows = [1, 60, 61, 1440, 10080]
    const beforeArchiving = await Promise.all(windows.map(kpis))
    const fromEighthDay = await keptAround(today - 8 * DAY)
    const archivedBefore = api.app.telemetryLifecycle.figures.partitionsArchived

    // The runs of a service that ran all along, day after day: each makes the partitions from
    // yesterday on (moving the DEFAULT partition's events of that day into it), archives the days
    // whose end is more than 7 days back and drops those whose end is more than 8 days back.
    await liveDays(NOW - 12 * DAY, NOW)
    t.equal(api.app.telemetryLifecycle.figures.partitionsArchived - archivedBefore, 6, 'six days archived in turn')
    t.same(
      await archives(),
      [archiveName(today - 8 * DAY)],
      'the day that ended 7 to 8 days ago is archived, older ones dropped',
    )
    t.notOk((await partitions()).includes(partitionName(today - 8 * DAY)), 'no longer a partition')
    t.ok((await partitions()).includes(partitionName(today - 7 * DAY)), 'the day the 7-day window still reaches is not')
    const indexes = await sql`select i.indexrelid::regclass::text as index from pg_index i
                            where i.indrelid = ${archiveName(today - 8 * DAY)}::regclass`
    t.same(
      indexes.map((r) => r.index),
      [`${archiveName(today - 8 * DAY)}_session`],
      'an archive keeps its session index alone',
    )
    t.same(
      await keptAround(today - 8 * DAY),
      { older: 0, kept: fromEighthDay.kept },
      'every event of the kept days is there, in the table or its archived day',
    )
    t.same(await Promise.all(windows.map(kpis)), beforeArchiving, 'every window answers as before archiving')

    // A day later the cut-off (8 days) has moved past more whole days.
    clock.set(new Date(NOW + DAY).toISOString())
    const after = NOW + DAY
    const beforeAfterClock = await Promise.all(windows.map(kpis))
    const cutoff = after - 8 * DAY
    const keptFrom = Math.floor(cutoff / DAY) * DAY
    const { older, kept } = await keptAround(keptFrom)
    t.ok(older > 0 && kept > 0)
    const figures = { ...api.app.telemetryLifecycle.figures }

    t.ok(await api.app.telemetryLifecycle.run())
    const left = await keptAround(keptFrom)
    t.equal(left.older, 0, 'every event of a day wholly older than the limit is gone')
    t.equal(left.kept, kept, 'every event of a later day is kept')
    t.same(await archives(), [archiveName(keptFrom)], 'by dropping the archived days; the next day archived in turn')
    t.equal(api.app.telemetryLifecycle.figures.rowsDropped - figures.rowsDropped, older, 'rows dropped counted')
    t.equal(api.app.telemetryLifecycle.figures.partitionsDropped - figures.partitionsDropped, 1)
    t.equal(
      api.app.telemetryLifecycle.figures.oldestEventMs,
      keptFrom,
      'the oldest kept: the archived day, from its start',
    )

    const horizon = after - 7 * DAY
    const [unreachable] =
      await sql`select (select count(*) from docs_search_queries where last_ms <= ${horizon})::int as queries,
                                         (select count(*) from docs_search_kpi_buckets where hour_ms <= ${horizon})::int as buckets,
                                         (select count(*) from docs_search_kpi_minutes where minute_ms <= ${horizon})::int as minutes`
    t.same(unreachable, { queries: 0, buckets: 0, minutes: 0 }, 'rollup rows and buckets no window reaches are gone')

    const afterRetention = await Promise.all(windows.map(kpis))
    t.same(afterRetention, beforeAfterClock, 'every window answers as before the drop')
    for (const [i, w] of windows.entries()) {
      const [expected] = await sql.unsafe(REFERENCE_KPIS, [after - w * 60_000, after])
      const { zero_result_rate, query_ctr, window_minutes, ...counts } = afterRetention[i]
      t.same(counts, expected, `window ${w} min: as the definitions over the kept events`)
    }
    t.not(beforeArchiving[4].total_queries, 0)
    clock.set(START)
  },
)

t.test('erasure reaches the archived days', async (t) => {
  const archive = archiveName(Math.floor((NOW - 7 * DAY) / DAY) * DAY)
  const count = async (table: string) =>
    (await sql`select count(*)::int as n from ${sql(table)} where session_id = 's1'`)[0]!.n as number
  const inArchive = await count(archive)
  const inTable = await count('docs_search_events')
  t.ok(inArchive > 0 && inTable > 0, `${inArchive} events of s1 archived, ${inTable} in the table`)
  const res = await api.request({ method: 'DELETE', url: '/api/v1/telemetry/docs-search/sessions/s1' })
  t.equal(res.statusCode, 200)
  t.same(res.json(), { session_id: 's1', erased_events: inArchive + inTable })
  t.equal(await count(archive), 0)
  t.equal(await count('docs_search_events'), 0)
  t.ok((await sql`select count(*)::int as n from ${sql(archive)} where session_id = 's2'`)[0]!.n > 0, 'nobody else’s')
})

t.test('an archiving cut short before its KPI indexes went is finished by the next run', async (t) => {
  const archive = archiveName(today - 8 * DAY)
  await sql.unsafe(`create table ${archive} (like docs_search_events including defaults)`)
  await sql.unsafe(`create index ${archive}_session on ${archive} (session_id)`)
  await sql.unsafe(`create index ${archive}_window on ${archive} (emitted_at_ms)`)
  t.ok(await api.app.telemetryLifecycle.run())
  const left = await sql`select indexrelid::regclass::text as index from pg_index where indrelid = ${archive}::regclass`
  t.same(
    left.map((r) => r.index),
    [`${archive}_session`],
  )
  await sql.unsafe(`drop table ${archive}`)
})

t.test('a day archived without its session index gets one from the next run', async (t) => {
  const archive = archiveName(today - 8 * DAY)
  await sql.unsafe(`create table ${archive} (like docs_search_events including defaults)`)
  t.ok(await api.app.telemetryLifecycle.run())
  const built =
    await sql`select indexrelid::regclass::text as index, indisvalid as valid from pg_index where indrelid = ${archive}::regclass`
  t.same(built, [{ index: `${archive}_session`, valid: true }])
  await sql.unsafe(`drop table ${archive}`)
})

t.test('a day left detached by a drop cut short (detached, not dropped) is dropped by the next run', async (t) => {
  // What the first of the drop's two transactions leaves when the process stops before the second.
  const day = Math.floor((NOW - 20 * DAY) / DAY) * DAY
  const name = partitionName(day)
  await sql.unsafe(`create table ${name} (like docs_search_events including defaults)`)
  await sql.unsafe(`insert into ${name} (event, emitted_at_ms) values ('search_query', $1), ('search_query', $2)`, [
    day + HOUR,
    day + 2 * HOUR,
  ])
  const figures = { ...api.app.telemetryLifecycle.figures }
  t.ok(await api.app.telemetryLifecycle.run())
  const [left] = await sql`select count(*)::int as n from pg_class where relname = ${name}`
  t.equal(left!.n, 0, `${name} is gone`)
  t.equal(api.app.telemetryLifecycle.figures.rowsDropped - figures.rowsDropped, 2, 'its rows counted as dropped')
  t.equal(api.app.telemetryLifecycle.figures.partitionsDropped - figures.partitionsDropped, 1)
})

t.test('a day that has ended is vacuumed, and its events are counted from its session index alone', async (t) => {
  const yesterday = partitionName(today - DAY)
  const events = Array.from({ length: 400 }, (_, i) => ({
    event: 'search_query',
    emitted_at_ms: today - DAY + i * 60_000,
    query_id: `ended-${i}`,
    ...(i % 3 === 0 ? {} : { session_id: `ended-session-${i % 7}` }),
  }))
  await ingest(events)
  const stats = async (name: string) =>
    (
      await sql`select n_ins_since_vacuum::int as pending, vacuum_count::int as vacuums
                from pg_stat_user_tables where relname = ${name}`
    )[0] as { pending: number; vacuums: number }
  // The inserts reach the statistics about a second after their transaction.
  for (let i = 0; (await stats(yesterday)).pending === 0; i++) {
    if (i > 100) throw new Error('no insert counted')
    await new Promise((r) => setTimeout(r, 50))
  }
  const before = await stats(yesterday)
  const todayBefore = await stats(partitionName(today))
  // A vacuum sets a page all-visible only when no snapshot open in the database is older than its
  // rows: the analytics refresh an earlier test's erasure asked for may still hold one.
  await api.app.analyticsRollup.settled()
  await waitFor('no other snapshot open in this database', async () => {
    const [open] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity
      where datname = current_database() and backend_xmin is not null and pid <> pg_backend_pid()`
    return open!.n === 0
  })
  t.ok(await api.app.telemetryLifecycle.run())
  t.equal((await stats(yesterday)).vacuums, before.vacuums + 1, 'yesterday, which has ended, vacuumed')
  t.equal((await stats(partitionName(today))).vacuums, todayBefore.vacuums, 'today, still being written, not')

  const reserved = await sql.reserve()
  t.teardown(() => reserved.release())
  // Neither a sequential nor a bitmap scan (either the planner may pick on a table this small):
  // the plan left reads the index, and its heap fetches show whether the vacuum set every page visible.
  await reserved`set enable_seqscan = off`
  await reserved`set enable_bitmapscan = off`
  const [
    {
      'QUERY PLAN': [plan],
    },
  ] = (await reserved.unsafe(`explain (analyze, format json) ${countRowsStatement(yesterday)}`)) as never as [
    { 'QUERY PLAN': [{ Plan: PlanNode }] },
  ]
  await reserved`reset enable_seqscan`
  await reserved`reset enable_bitmapscan`
  const scans = flatten(plan.Plan).filter((n) => n['Relation Name'] === yesterday || n['Index Name'])
  t.same(
    scans.map((n) => [n['Node Type'], n['Index Name'], n['Heap Fetches']]),
    [['Index Only Scan', `${yesterday}_session`, 0]],
    'the count reads the session index alone, no heap page',
  )
  const [{ n }] = (await sql.unsafe(`select count(*)::int as n from ${yesterday}`)) as never as [{ n: number }]
  t.ok(n >= events.length, `${n} events that day`)
  t.equal(await createTelemetryLifecycleRepository(reserved as never).countRows(yesterday), n, 'and counts every event')
})

t.test('/metrics shows the retention figures', async (t) => {
  const text = (await api.app.inject({ method: 'GET', url: '/metrics' })).body
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1])
  const f = api.app.telemetryLifecycle.figures
  t.equal(value('docs_search_retention_rows_dropped'), f.rowsDropped)
  t.ok(f.rowsDropped > 0)
  t.equal(value('docs_search_retention_partitions_dropped'), f.partitionsDropped)
  t.ok(value('docs_search_retention_rollup_rows_dropped') > 0)
  t.ok(Math.abs(value('docs_search_retention_last_run_timestamp_seconds') - Date.now() / 1000) < 60)
  t.equal(value('docs_search_oldest_event_kept_timestamp_seconds'), f.oldestEventMs! / 1000)
})

t.test('TELEMETRY_RETENTION_DAYS below the longest KPI window stops the start with one line', async (t) => {
  t.throws(
    () => loadConfig({ TELEMETRY_RETENTION_DAYS: '6' }),
    new ConfigError('TELEMETRY_RETENTION_DAYS must be at least 7 (the longest KPI window), got "6"'),
  )
  t.throws(() => loadConfig({ TELEMETRY_RETENTION_DAYS: 'x' }), /TELEMETRY_RETENTION_DAYS must be an integer/)
  t.equal(loadConfig({}).telemetryRetentionDays, 30)
  t.equal(loadConfig({ TELEMETRY_RETENTION_DAYS: '7' }).telemetryRetentionDays, 7)
})

t.test('ingest during an archiving that waits for its lock is answered at once', async (t) => {
  // A service of its own, so that its days have never been archived by the tests above (last in
  // this file: its metrics take the process-wide registry's names).
  const ownClock = manualClock(START)
  const own = await buildTestApp(t, { TELEMETRY_RETENTION_DAYS: '8' }, { now: ownClock.now })
  // A day that passes the KPI horizon tomorrow, and a reader that holds the table (a long KPI query, say).
  const day = today - 7 * DAY
  for (let at = day; at <= NOW; at += DAY) {
    ownClock.set(new Date(at).toISOString())
    await own.app.telemetryLifecycle.run()
  }
  ownClock.set(START)
  const post = async (event: object) => {
    const res = await own.request({
      method: 'POST',
      url: '/api/v1/telemetry/docs-search/batch',
      payload: { events: [event] },
    })
    if (res.statusCode !== 202) throw new Error(`ingest answered ${res.statusCode}`)
  }
  const tableOf = async (queryId: string) =>
    (await own.db.sql`select tableoid::regclass::text as p from docs_search_events where query_id = ${queryId}`).map(
      (r) => r.p as string,
    )
  await post({ event: 'search_query', emitted_at_ms: day + HOUR, query_id: 'to-archive' })
  t.same(await tableOf('to-archive'), [partitionName(day)])
  const reader = postgres(own.db.url, { max: 1, onnotice: () => {} })
  t.teardown(() => reader.end())
  let release!: () => void
  let locked!: () => void
  const held = new Promise<void>((resolve) => (release = resolve))
  const reading = new Promise<void>((resolve) => (locked = resolve))
  const holding = reader.begin(async (tx) => {
    await tx`select count(*) from docs_search_events`
    locked()
    await held
  })
  await reading
  ownClock.set(new Date(NOW + DAY).toISOString())
  const run = own.app.telemetryLifecycle.run()
  // The archiving's detach is queued behind the reader (or sleeping between its tries).
  await waitFor(
    'the archiving to wait for its lock on the table',
    async () =>
      (
        await own.db.sql`select 1 from pg_locks
          where relation = 'docs_search_events'::regclass and mode = 'AccessExclusiveLock' and not granted`
      ).length > 0,
    { everyMs: 5 },
  )
  // Answered while the reader still holds the table: the ingest never waits for the archiving
  // (a batch stuck behind it would only be answered after release(), and the deadline fails it).
  await within(
    'a batch during the archiving to be answered',
    post({ event: 'search_query', emitted_at_ms: NOW + DAY - 1000, query_id: 'during-archiving' }),
  )
  t.same(await tableOf('to-archive'), [partitionName(day)], 'the archiving has not happened yet')
  release()
  await holding
  t.ok(await run)
  t.same(await tableOf('to-archive'), [], 'the archiving happened once the reader was done')
  const [archived] = await own.db
    .sql`select count(*)::int as n from ${own.db.sql(archiveName(day))} where query_id = 'to-archive'`
  t.equal(archived!.n, 1, 'into its archive table')
  t.same(await tableOf('during-archiving'), [partitionName(today + DAY)])
})

// SQL for docs-search telemetry (table docs_search_events and its rollups): multi-row append, the KPI
// query and a session's erasure. Partitions and retention: telemetry-lifecycle.ts.
import type { Db } from '../db/client.js'
import type { components } from '../../generated/api.js'
import {
  type Answer,
  type AnswerStore,
  answerIdempotently,
  type IdempotentRequest,
  inTransaction,
} from '../idempotency/index.js'
import { json } from '../library-types.js'
import { archiveNames } from './telemetry-lifecycle.js'

export type DocsSearchEvent = components['schemas']['DocsSearchTelemetryIngestRequest']
export type DocsSearchMetrics = components['schemas']['DocsSearchTelemetryMetricsResponse']

// The event columns an ingest writes: name, type, and the default of an omitted field (null: the
// field is required, or kept as null). The INSERT below is built from this one list.
const EVENT_COLUMNS: readonly [name: string, type: string, whenOmitted: string | null][] = [
  ['event', 'text', null],
  ['emitted_at_ms', 'bigint', null],
  ['page_path', 'text', "''"],
  ['session_id', 'text', "''"],
  ['query_id', 'text', "''"],
  ['query_text', 'text', "''"],
  ['query_len', 'integer', '0'],
  ['tokens_count', 'integer', '0'],
  ['results_count', 'integer', '0'],
  ['result_rank', 'integer', '0'],
  ['result_url', 'text', "''"],
  ['latency_ms', 'integer', '0'],
  ['time_to_success_ms', 'integer', '0'],
  ['time_to_click_ms', 'integer', '0'],
  ['source', 'text', "''"],
  ['top_results', 'jsonb', null],
  ['payload', 'jsonb', null],
]

// $1: the batch as one json array, unpacked by PostgreSQL with the columns' types (an absent
// field reads as null, then takes its default), instead of one bind parameter per field. json,
// not jsonb: json_to_recordset reads the text once, where jsonb would first build the whole
// binary document only to take it apart again.
const APPEND_SQL = `
  insert into docs_search_events (${EVENT_COLUMNS.map(([name]) => name).join(', ')})
  select ${EVENT_COLUMNS.map(([name, , omitted]) => (omitted === null ? `e.${name}` : `coalesce(e.${name}, ${omitted})`)).join(', ')}
  from json_to_recordset($1) as e(${EVENT_COLUMNS.map(([name, type]) => `${name} ${type}`).join(', ')})`

const MINUTE_MS = 60_000
const HOUR_MS = 3_600_000

// The KPI query over the window ($1, $2] on emitted_at_ms. A window is cut into the whole minutes
// inside it, [$3, $4), and two partial minutes at its edges, ($1, $3) and [$4, $2] ($4 ≥ $3; both
// may be empty); the whole minutes hold the whole hours [$5, $6) ($3 ≤ $5 ≤ $6 ≤ $4). Per query
// id, the window's definitions hold over the query's events inside it:
// - whole minutes: the sums kept per hour (docs_search_kpi_buckets, migration 0008) for the whole
//   hours, and per minute (docs_search_kpi_minutes, 0012) for the minutes around them, each by
//   the hour or minute of a query's first event and the band of its first success;
// - partial minutes: the rollup rows (docs_search_queries) of queries with every event in the
//   window, summed per band straight from an index over the edge, and the events without a
//   query id, each read from an index over the edge alone;
// - queries with events on both sides of an edge ("straddlers", found through the span index):
//   recomputed from their own events inside the window; one counted in a whole minute is taken
//   out of it (only a query with events after $2 can be, as no whole minute precedes $1).
// Percentiles (nearest rank, as percentile_disc): the band counts give the total N and, for
// rank ceil(p·N), the band that holds it; only that band's values inside the window are read
// (rollup rows with every event in the window, and the straddlers' recomputed values) and sorted.
// The band's rollup rows are read one value at a time (250 short ranges of the success index,
// ordered by value, then first_ms): one range over the band would also read every row of the
// band outside the window, all week long. The last band (120 s and more) is open-ended: one range.
// The sign column is +1 for what is added to the buckets' sums, -1 for what is taken out.
// Every part reads an index range bounded by the window, so one plan fits every window: the
// statement is prepared (planning it took longer than running it for a 60-minute window).
const METRICS_SQL = `
  with whole as (
    select band, queries, zero_result_queries, clicked, successes
    from docs_search_kpi_buckets
    where hour_ms >= $5::bigint and hour_ms < $6::bigint
    union all
    select band, queries, zero_result_queries, clicked, successes
    from docs_search_kpi_minutes
    where (minute_ms >= $3::bigint and minute_ms < $5::bigint) or (minute_ms >= $6::bigint and minute_ms < $4::bigint)
  ),
  edges as (
    select docs_search_band(first_success_ms) as band, sum(queries) as queries, sum(zero_result_queries) as zero_result_queries,
           count(*) filter (where queries > 0 and has_click) as clicked, count(first_success_ms) as successes
    from (
      select queries, zero_result_queries, has_click, first_success_ms
      from docs_search_queries
      where first_ms > $1::bigint and first_ms < least($3::bigint, $2::bigint + 1) and last_ms <= $2::bigint
      union all
      select queries, zero_result_queries, has_click, first_success_ms
      from docs_search_queries
      where first_ms >= $4::bigint and first_ms <= $2::bigint and last_ms <= $2::bigint
    ) edge_rows
    group by 1
  ),
  straddlers as (
    select s.first_ms, s.queries as rolled_queries, s.zero_result_queries as rolled_zero, s.has_click as rolled_click,
           s.first_success_ms as rolled_success, e.*
    from docs_search_queries s
    cross join lateral (
      select count(*) filter (where event = 'search_query') as queries,
             count(*) filter (where event = 'search_query' and results_count = 0) as zero_result_queries,
             bool_or(event = 'search_result_click') as has_click,
             min(time_to_success_ms) filter (where time_to_success_ms > 0) as first_success_ms
      from docs_search_events
      where query_id = s.query_id and emitted_at_ms > $1::bigint and emitted_at_ms <= $2::bigint
    ) e
    where (int8range(s.first_ms, s.last_ms, '[]') @> $1::bigint and s.last_ms > $1::bigint)
       or (int8range(s.first_ms, s.last_ms, '[]') @> ($2::bigint + 1) and s.first_ms <= $2::bigint)
  ),
  adjustments (band, queries, zero_result_queries, clicked, successes, sign) as (
    select band, queries, zero_result_queries, clicked, successes, 1 from edges
    union all
    select docs_search_band(first_success_ms), queries, zero_result_queries, (queries > 0 and coalesce(has_click, false))::int,
           (first_success_ms is not null)::int, 1
    from straddlers
    union all
    select docs_search_band(rolled_success), rolled_queries, rolled_zero, (rolled_queries > 0 and rolled_click)::int,
           (rolled_success is not null)::int, -1
    from straddlers where first_ms >= $3::bigint and first_ms < $4::bigint
  ),
  unnamed as (
    select count(*) filter (where event = 'search_query') as queries,
           count(*) filter (where event = 'search_query' and results_count = 0) as zero_result_queries
    from docs_search_events
    where query_id = '' and ((emitted_at_ms > $1::bigint and emitted_at_ms < least($3::bigint, $2::bigint + 1)) or (emitted_at_ms >= $4::bigint and emitted_at_ms <= $2::bigint))
  ),
  totals as materialized (
    select w.queries + u.queries + a.queries as total,
           w.zero_result_queries + u.zero_result_queries + a.zero_result_queries as zero,
           w.clicked + a.clicked as clicked
    from (select coalesce(sum(queries), 0) as queries, coalesce(sum(zero_result_queries), 0) as zero_result_queries,
                 coalesce(sum(clicked), 0) as clicked
          from whole) w,
         unnamed u,
         (select coalesce(sum(sign * queries), 0) as queries, coalesce(sum(sign * zero_result_queries), 0) as zero_result_queries,
                 coalesce(sum(sign * clicked), 0) as clicked
          from adjustments) a
  ),
  bands as (
    select band, sum(n) as n
    from (
      select band, successes as n from whole where band >= 0
      union all
      select band, sign * successes from adjustments where band is not null
    ) counted
    group by band
  ),
  ranked as (
    select band, n, sum(n) over (order by band) as reached, sum(n) over () as total from bands
  ),
  -- nearest rank: the value at position max(1, ceil(p·N)) of the sorted values
  wanted as (
    select p, greatest(1, ceil(p * total))::bigint as rank
    from unnest(array[0.5, 0.75]::float8[]) as p, (select coalesce(max(total), 0) as total from ranked) t
    where total > 0
  ),
  located as (
    select w.p, r.band, w.rank - (r.reached - r.n) as rank_in_band
    from wanted w
    cross join lateral (select band, n, reached from ranked where reached >= w.rank order by band limit 1) r
  ),
  percentiles as (
    select l.p,
           (select v from (
              select q.first_success_ms as v
              from generate_series(l.band * 250, l.band * 250 + 249) as ms
              cross join lateral (
                select first_success_ms from docs_search_queries
                where first_success_ms = ms and first_ms > $1::bigint and first_ms <= $2::bigint and last_ms <= $2::bigint
              ) q
              where l.band < 480
              union all
              select first_success_ms
              from docs_search_queries
              where l.band = 480 and first_success_ms >= l.band * 250
                and first_ms > $1::bigint and first_ms <= $2::bigint and last_ms <= $2::bigint
              union all
              select first_success_ms from straddlers
              where first_success_ms is not null and docs_search_band(first_success_ms) = l.band
            ) band_values
            order by v offset l.rank_in_band - 1 limit 1) as value
    from located l
  )
  select total::int as total_queries,
         zero::int as zero_result_queries,
         case when total = 0 then 0 else zero::float8 / total end as zero_result_rate,
         clicked::int as queries_with_click,
         case when total = 0 then 0 else clicked::float8 / total end as query_ctr,
         (select value from percentiles where p = 0.5) as median_time_to_first_success_ms,
         (select value from percentiles where p = 0.75) as p75_time_to_first_success_ms
  from totals`

/** The aligned periods inside (fromMs, toMs], each as [start, end) with end ≥ start (empty when none). */
function wholePeriods(fromMs: number, toMs: number, periodMs: number): [number, number] {
  const start = Math.ceil((fromMs + 1) / periodMs) * periodMs
  const end = Math.floor((toMs + 1) / periodMs) * periodMs
  return [start, Math.max(start, end)]
}

/**
 * The whole minutes inside (fromMs, toMs] and the whole hours among them: $3-$6 of METRICS_SQL.
 * Without a whole hour, the hours are the empty range at the minutes' end.
 */
export function wholeMinutesAndHours(fromMs: number, toMs: number): [number, number, number, number] {
  const [minutesStart, minutesEnd] = wholePeriods(fromMs, toMs, MINUTE_MS)
  const [hoursStart, hoursEnd] = wholePeriods(fromMs, toMs, HOUR_MS)
  return hoursEnd > hoursStart
    ? [minutesStart, minutesEnd, hoursStart, hoursEnd]
    : [minutesStart, minutesEnd, minutesEnd, minutesEnd]
}

// A session's events out of one table ($1: the session id), their 5-minute slices and query ids
// logged for the analytics rollup's next refresh (which also recomputes the slices sharing those
// query ids).
const eraseStatement = (table: string) => `
  with erased as (
    delete from "${table.replaceAll('"', '""')}" where session_id = $1 and session_id <> ''
    returning emitted_at_ms, query_id, event
  ),
  logged as (
    insert into docs_search_analytics_dirty (slice_ms, query_id, erased)
    select distinct (emitted_at_ms / 300000) * 300000, query_id, true from erased
    where event in ('search_query', 'search_result_click')
  )
  select count(*) as n from erased`

export function createTelemetryRepository(db: Db) {
  return {
    /**
     * Appends the events in one INSERT (its trigger updates the query rollup in the same
     * statement); omitted optional fields take their defaults. The batch goes as one json
     * parameter that PostgreSQL unpacks (json_to_recordset), not as 17 bind parameters per
     * event: for a batch of 500 the driver would otherwise type and encode 8,500 values.
     */
    async append(events: DocsSearchEvent[]): Promise<number> {
      await db.unsafe(APPEND_SQL, [json(db, events)], { prepare: true })
      return events.length
    },

    /**
     * Deletes every raw event of one session, in the partitioned table and in the days archived
     * past the KPI horizon; the number deleted (0 when none is left). Run in a transaction: the
     * first DELETE's lock on the table makes a day's archiving wait until the commit, so a day
     * is erased either as a partition or, listed after it, as an archive. Each table answers from
     * its session index; the KPI rollups (no session, no text) stay; the hours the session touched
     * are logged for the analytics rollup, which copies texts and session ids.
     */
    async eraseSession(sessionId: string): Promise<number> {
      const erase = async (table: string) => {
        const [row] = await db.unsafe<{ n: string }[]>(eraseStatement(table), [sessionId])
        return Number(row!.n)
      }
      const partitioned = await erase('docs_search_events')
      const archived = await Promise.all((await archiveNames(db)).map(erase))
      return archived.reduce((sum, n) => sum + n, partitioned)
    },

    /**
     * Every KPI of the window (fromMs, toMs] in one round trip, reading the window's own rows
     * (see METRICS_SQL).
     */
    async metrics(fromMs: number, toMs: number): Promise<Omit<DocsSearchMetrics, 'window_minutes'>> {
      const [row] = await db.unsafe<Omit<DocsSearchMetrics, 'window_minutes'>[]>(
        METRICS_SQL,
        [fromMs, toMs, ...wholeMinutesAndHours(fromMs, toMs)],
        { prepare: true },
      )
      return row!
    },
  }
}

export type TelemetryRepository = ReturnType<typeof createTelemetryRepository>

/** The idempotent write of telemetry (src/idempotency/). */
export function createTelemetryWrites(db: AnswerStore) {
  return {
    /**
     * POST /api/v1/telemetry/docs-search/batch with an Idempotency-Key (optional there): the
     * batch's INSERT and its answer's record in one transaction, so a retried batch is stored
     * once and answered with the first 202.
     */
    appendOnce(request: IdempotentRequest, events: DocsSearchEvent[]): Promise<Answer> {
      return answerIdempotently(db, request, {
        store: () =>
          inTransaction(db, request, async (tx) => ({
            status: 202,
            body: { accepted: await createTelemetryRepository(tx).append(events) },
          })),
      })
    },
  }
}

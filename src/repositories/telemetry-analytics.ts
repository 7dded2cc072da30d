// SQL for the docs-search analytics over a range of UTC days: top searches, searches without
// results or without clicks, click positions and a per-day or per-hour series. Definitions follow
// Algolia's Analytics API: a search is one `search_query` event; a click belongs to the searches
// with its `query_id`; a rate is null when there were no searches. These read the raw events of
// the range, in the partitioned table and in the days archived past the KPI horizon (one pass per answer); each answer is a plain array; docs/docs-search-analytics.md says what a rollup must keep.
import type { Db } from '../db/client.js'
import { archiveDayMs, archiveNames, DAY_MS } from './telemetry-lifecycle.js'

/**
 * A query text as compared and shown: trimmed, lower case, inner whitespace collapsed to one
 * space, Unicode NFC (the same steps, in this order, as normaliseQuery).
 */
export const NORMALISED_QUERY_SQL = `normalize(regexp_replace(lower(regexp_replace(query_text, '^\\s+|\\s+$', '', 'g')), '\\s+', ' ', 'g'), NFC)`

/** The JavaScript twin of NORMALISED_QUERY_SQL. */
export function normaliseQuery(text: string): string {
  return text.trim().toLowerCase().replace(/\s+/g, ' ').normalize('NFC')
}

/** Half-open range [fromMs, toMs) in epoch milliseconds. */
export interface AnalyticsRange {
  fromMs: number
  toMs: number
}

export interface SearchRow {
  query: string
  count: number
  no_result_count: number
  with_click_count: number
  click_through_rate: number | null
  average_click_position: number | null
}
export interface QueryCount {
  query: string
  count: number
}
export interface PositionBucket {
  from_rank: number
  to_rank: number | null
  clicks: number
}
export interface SeriesPoint {
  start: string
  total_queries: number
  zero_result_queries: number
  queries_with_click: number
  query_ctr: number | null
  zero_result_rate: number | null
}

// $1, $2: the range [from, to) in ms. `searches`: every search of the range with its normalised
// query, whether a click of the range carries its query id, and its session (a search without one
// is a session of its own, named by its row).
const SEARCHES_CTE = (EVENTS: string) => `
  clicked as (
    select distinct query_id from ${EVENTS} as events
    where event = 'search_result_click' and query_id <> '' and emitted_at_ms >= $1::bigint and emitted_at_ms < $2::bigint
  ),
  searches as (
    select ${NORMALISED_QUERY_SQL} as query, e.query_id, e.results_count, e.emitted_at_ms,
           coalesce(nullif(e.session_id, ''), 'event:' || e.ctid::text || ':' || e.tableoid::text) as session,
           c.query_id is not null as with_click
    from ${EVENTS} e
    left join clicked c on c.query_id = e.query_id and e.query_id <> ''
    where e.event = 'search_query' and e.emitted_at_ms >= $1::bigint and e.emitted_at_ms < $2::bigint
  ),
  per_query as (
    select query, count(*) as count,
           count(*) filter (where results_count = 0) as no_result_count,
           count(*) filter (where with_click) as with_click_count,
           count(*) filter (where results_count > 0 and not with_click) as no_click_count,
           count(distinct session) as sessions
    from searches
    group by query
  )`

// $3: the fewest distinct sessions a listed query needs; $4: the list's length.
const SEARCHES_SQL = (EVENTS: string) => `
  with ${SEARCHES_CTE(EVENTS)},
  positions as (
    select q.query, avg(e.result_rank)::float8 as average_click_position
    from (select distinct query, query_id from searches where query_id <> '') q
    join ${EVENTS} e on e.query_id = q.query_id
    where e.event = 'search_result_click' and e.result_rank > 0 and e.emitted_at_ms >= $1::bigint and e.emitted_at_ms < $2::bigint
    group by q.query
  )
  select p.query, p.count::int, p.no_result_count::int, p.with_click_count::int,
         p.with_click_count::float8 / p.count as click_through_rate,
         pos.average_click_position
  from per_query p left join positions pos using (query)
  where p.sessions >= $3::int
  order by p.count desc, p.query
  limit $4::int`

const COUNTED_SQL = (EVENTS: string, column: string) => `
  with ${SEARCHES_CTE(EVENTS)}
  select query, ${column}::int as count
  from per_query
  where sessions >= $3::int and ${column} > 0
  order by ${column} desc, query
  limit $4::int`

// Ranks 1-10 one bucket each, 11-20 one, 21 and above one (to_rank null).
const POSITIONS_SQL = (EVENTS: string) => `
  with buckets (from_rank, to_rank) as (
    select r, r from generate_series(1, 10) r
    union all select 11, 20
    union all select 21, null
  ),
  clicks as (
    select result_rank from ${EVENTS} as events
    where event = 'search_result_click' and result_rank > 0 and emitted_at_ms >= $1::bigint and emitted_at_ms < $2::bigint
  )
  select b.from_rank, b.to_rank,
         (select count(*) from clicks c where c.result_rank >= b.from_rank and (b.to_rank is null or c.result_rank <= b.to_rank))::int as clicks
  from buckets b
  order by b.from_rank`

// $3: the period in ms (a day or an hour); every period of the range has a point.
const SERIES_SQL = (EVENTS: string) => `
  with ${SEARCHES_CTE(EVENTS)},
  periods as (select generate_series($1::bigint, $2::bigint - 1, $3::bigint) as start_ms),
  counted as (
    select (emitted_at_ms - $1::bigint) / $3::bigint * $3::bigint + $1::bigint as start_ms,
           count(*) as total, count(*) filter (where results_count = 0) as zero, count(*) filter (where with_click) as clicked
    from searches group by 1
  )
  select p.start_ms, coalesce(c.total, 0)::int as total_queries, coalesce(c.zero, 0)::int as zero_result_queries,
         coalesce(c.clicked, 0)::int as queries_with_click
  from periods p left join counted c using (start_ms)
  order by p.start_ms`

const rate = (part: number, whole: number) => (whole === 0 ? null : part / whole)

const EVENT_COLUMNS =
  'event, emitted_at_ms, session_id, query_id, query_text, results_count, result_rank, ctid, tableoid'
// Names from the catalogue that matched the archive pattern; quoted all the same.
const quoted = (name: string) => `"${name.replaceAll('"', '""')}"`

/**
 * The events a range reads: the partitioned table, and with it (union all, so each part keeps
 * its own plan) the archived days the range covers.
 */
async function eventsSource(db: Db, range: AnalyticsRange): Promise<string> {
  const archived = (await archiveNames(db)).filter((name) => {
    const dayMs = archiveDayMs(name)
    return dayMs !== null && dayMs + DAY_MS > range.fromMs && dayMs < range.toMs
  })
  if (archived.length === 0) return 'docs_search_events'
  const parts = ['docs_search_events', ...archived.map(quoted)].map((table) => `select ${EVENT_COLUMNS} from ${table}`)
  return `(${parts.join(' union all ')})`
}

/**
 * A range's query over the events it reads, prepared: $1 and $2 the range's bounds in ms, `more`
 * from $3 on. A plain array, not postgres.js's result list.
 */
async function queryRange<Row extends object>(
  db: Db,
  range: AnalyticsRange,
  sqlOver: (events: string) => string,
  more: number[] = [],
): Promise<Row[]> {
  const rows = await db.unsafe<Row[]>(sqlOver(await eventsSource(db, range)), [range.fromMs, range.toMs, ...more], {
    prepare: true,
  })
  return [...rows]
}

export function createTelemetryAnalyticsRepository(db: Db) {
  return {
    /** The most frequent queries asked by at least minSessions sessions, most frequent first. */
    searches(range: AnalyticsRange, minSessions: number, limit: number): Promise<SearchRow[]> {
      return queryRange(db, range, SEARCHES_SQL, [minSessions, limit])
    },

    /** The queries whose searches found nothing, with how many did. */
    noResults(range: AnalyticsRange, minSessions: number, limit: number): Promise<QueryCount[]> {
      return queryRange(db, range, (events) => COUNTED_SQL(events, 'no_result_count'), [minSessions, limit])
    },

    /** The queries whose searches found results and got no click, with how many did. */
    noClicks(range: AnalyticsRange, minSessions: number, limit: number): Promise<QueryCount[]> {
      return queryRange(db, range, (events) => COUNTED_SQL(events, 'no_click_count'), [minSessions, limit])
    },

    /** Clicks of the range by the rank clicked: 1 to 10, 11 to 20, 21 and above. */
    clickPositions(range: AnalyticsRange): Promise<PositionBucket[]> {
      return queryRange(db, range, POSITIONS_SQL)
    },

    /** One point per period (periodMs: a day or an hour) of the range, from its start. */
    async series(range: AnalyticsRange, periodMs: number): Promise<SeriesPoint[]> {
      const rows = await queryRange<{
        start_ms: string
        total_queries: number
        zero_result_queries: number
        queries_with_click: number
      }>(db, range, SERIES_SQL, [periodMs])
      return rows.map((r) => ({
        start: new Date(Number(r.start_ms)).toISOString(),
        total_queries: r.total_queries,
        zero_result_queries: r.zero_result_queries,
        queries_with_click: r.queries_with_click,
        query_ctr: rate(r.queries_with_click, r.total_queries),
        zero_result_rate: rate(r.zero_result_queries, r.total_queries),
      }))
    },
  }
}

export type TelemetryAnalyticsRepository = ReturnType<typeof createTelemetryAnalyticsRepository>

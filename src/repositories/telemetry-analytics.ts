// SQL for the docs-search analytics over a range of UTC days: top searches, searches without
// results or without clicks, click positions and a per-day or per-hour series. Definitions follow
// Algolia's Analytics API: a search is one `search_query` event; a click belongs to the searches
// with its `query_id`; a rate is null when there were no searches. They read the per-hour rollup
// (migration 0016, as fresh as its last refresh); a privacy threshold above SESSIONS_KEPT sessions, which the
// rollup cannot decide, reads the range's raw events (in the partitioned table and the archived
// days). docs/docs-search-analytics.md says what the rollup keeps and how fresh it is.
import type { Db } from '../db/client.js'
import { archiveDayMs, archiveNames, DAY_MS } from './telemetry-lifecycle.js'

/**
 * A query text as compared and shown: trimmed, lower case, inner whitespace collapsed to one
 * space, Unicode NFC (the same steps, in this order, as normaliseQuery).
 */
export const NORMALISED_QUERY_SQL = `normalize(regexp_replace(lower(regexp_replace(query_text, '^\\s+|\\s+$', '', 'g')), '\\s+', ' ', 'g'), NFC)`

/**
 * Distinct session ids the rollup keeps per row (the least ones): a threshold
 * TELEMETRY_MIN_SESSIONS up to this many is decided by the rollup alone, exactly (a row that
 * holds fewer holds all of its own).
 */
export const SESSIONS_KEPT = 10

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

// The raw-event answers. $1, $2: the range [from, to) in ms. `searches`: every search of the range with its normalised
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

// The rollup (migration 0016, refreshed by src/telemetry/analytics-rollup.ts) over the days or
// hours of [$1, $2). Per query: the per-hour rows, plus what the query ids spanning days add once paired
// within the range (a search has a click when its id has one anywhere in the range).
const inRange = (column: string) => `${column} >= $1::bigint and ${column} < $2::bigint`
const ROLLUP_RANGE = inRange('slice_ms')
const SPANNING_CTE = `
  spanning_ids as (
    select query_id, sum(clicks) > 0 as clicked, sum(ranked_clicks) as ranked_clicks, sum(rank_sum) as rank_sum
    from docs_search_analytics_spanning_clicks where ${ROLLUP_RANGE}
    group by query_id
  ),
  spanning_searches as (
    select s.slice_ms, s.query_id, s.query, s.searches, s.with_results, coalesce(c.clicked, false) as clicked
    from docs_search_analytics_spanning_searches s left join spanning_ids c using (query_id)
    where s.${ROLLUP_RANGE}
  )`

// $3: the fewest distinct sessions a listed query needs, at most SESSIONS_KEPT (see
// sessionsDecidable): the searches without a session and the distinct session ids the days keep.
const ROLLUP_PER_QUERY_CTE = `
  ${SPANNING_CTE},
  hours as (
    select query, sum(searches) as count, sum(no_results) as no_result_count, sum(with_click) as with_click,
           sum(no_click) as no_click, sum(unnamed) as unnamed, sum(ranked_clicks) as ranked_clicks, sum(rank_sum) as rank_sum
    from docs_search_analytics_days where day_ms >= $1::bigint and day_ms < $2::bigint
    group by query
  ),
  named as (
    select query, count(distinct s) as sessions
    from docs_search_analytics_days, unnest(sessions) s
    where day_ms >= $1::bigint and day_ms < $2::bigint
    group by query
  ),
  spanning as (
    select query, sum(searches) filter (where clicked) as with_click,
           sum(with_results) filter (where not clicked) as no_click
    from spanning_searches group by query
  ),
  spanning_ranks as (
    select q.query, sum(c.ranked_clicks) as ranked_clicks, sum(c.rank_sum) as rank_sum
    from (select distinct query, query_id from spanning_searches) q join spanning_ids c using (query_id)
    group by q.query
  ),
  per_query as (
    select h.query, h.count, h.no_result_count,
           h.with_click + coalesce(s.with_click, 0) as with_click_count,
           h.no_click + coalesce(s.no_click, 0) as no_click_count,
           h.ranked_clicks + coalesce(r.ranked_clicks, 0) as ranked_clicks,
           h.rank_sum + coalesce(r.rank_sum, 0) as rank_sum
    from hours h left join spanning s using (query) left join spanning_ranks r using (query) left join named n using (query)
    where h.count > 0 and h.unnamed + coalesce(n.sessions, 0) >= $3::int
  )`

const ROLLUP_SEARCHES_SQL = `
  with ${ROLLUP_PER_QUERY_CTE}
  select query, count::int, no_result_count::int, with_click_count::int,
         with_click_count::float8 / count as click_through_rate,
         case when ranked_clicks > 0 then (rank_sum::numeric / ranked_clicks)::float8 end as average_click_position
  from per_query
  order by count desc, query
  limit $4::int`

const ROLLUP_COUNTED_SQL = (column: string) => `
  with ${ROLLUP_PER_QUERY_CTE}
  select query, ${column}::int as count
  from per_query
  where ${column} > 0
  order by ${column} desc, query
  limit $4::int`

// Ranks 1-10 one bucket each, 11-20 one, 21 and above one (to_rank null).
const POSITIONS_SQL = `
  with buckets (from_rank, to_rank) as (
    select r, r from generate_series(1, 10) r
    union all select 11, 20
    union all select 21, null
  ),
  counted as (
    select from_rank, sum(clicks) as clicks from docs_search_analytics_rank_days where ${inRange('day_ms')} group by from_rank
  )
  select b.from_rank, b.to_rank, coalesce(c.clicks, 0)::int as clicks
  from buckets b left join counted c using (from_rank)
  order by b.from_rank`

// $3: the period in ms (a day or an hour); every period of the range has a point.
const SERIES_SQL = `
  with ${SPANNING_CTE},
  periods as (select generate_series($1::bigint, $2::bigint - 1, $3::bigint) as start_ms),
  counted as (
    select (hour_ms - $1::bigint) / $3::bigint * $3::bigint + $1::bigint as start_ms,
           sum(searches) as total, sum(no_results) as zero, sum(with_click) as clicked
    from docs_search_analytics_hours where ${inRange('hour_ms')} and $3::bigint < ${DAY_MS}
    group by 1
    union all
    select (day_ms - $1::bigint) / $3::bigint * $3::bigint + $1::bigint as start_ms,
           sum(searches) as total, sum(no_results) as zero, sum(with_click) as clicked
    from docs_search_analytics_days where day_ms >= $1::bigint and day_ms < $2::bigint and $3::bigint >= ${DAY_MS}
    group by 1
    union all
    select (slice_ms - $1::bigint) / $3::bigint * $3::bigint + $1::bigint, 0, 0, sum(searches)
    from spanning_searches where clicked
    group by 1
  ),
  summed as (select start_ms, sum(total) as total, sum(zero) as zero, sum(clicked) as clicked from counted group by 1)
  select p.start_ms, coalesce(c.total, 0)::int as total_queries, coalesce(c.zero, 0)::int as zero_result_queries,
         coalesce(c.clicked, 0)::int as queries_with_click
  from periods p left join summed c using (start_ms)
  order by p.start_ms`

/**
 * Whether the rollup can tell if a query reached minSessions distinct sessions: it keeps, per
 * hour (and day) and query, the searches without a session and up to SESSIONS_KEPT distinct
 * session ids, which decide "at least N" exactly for N up to SESSIONS_KEPT. A higher threshold
 * counts the sessions in the raw events.
 */
export const sessionsDecidable = (minSessions: number) => minSessions <= SESSIONS_KEPT

const rate = (part: number, whole: number) => (whole === 0 ? null : part / whole)

const EVENT_COLUMNS =
  'event, emitted_at_ms, session_id, query_id, query_text, results_count, result_rank, ctid, tableoid'
// Names from the catalogue that matched the archive pattern; quoted all the same.
const quoted = (name: string) => `"${name.replaceAll('"', '""')}"`

/**
 * The events of the days `wanted` picks: the partitioned table, and with it (union all, so each
 * part keeps its own plan) those archived days.
 */
export async function eventsSource(db: Pick<Db, 'unsafe'>, wanted: (dayMs: number) => boolean): Promise<string> {
  const archived = (await archiveNames(db)).filter((name) => {
    const dayMs = archiveDayMs(name)
    return dayMs !== null && wanted(dayMs)
  })
  if (archived.length === 0) return 'docs_search_events'
  const parts = ['docs_search_events', ...archived.map(quoted)].map((table) => `select ${EVENT_COLUMNS} from ${table}`)
  return `(${parts.join(' union all ')})`
}

/** The events a range reads, in the partitioned table and the archived days it covers. */
const rangeSource = (db: Db, range: AnalyticsRange) =>
  eventsSource(db, (dayMs) => dayMs + DAY_MS > range.fromMs && dayMs < range.toMs)

export function createTelemetryAnalyticsRepository(db: Db) {
  /** A list from the rollup, or for a threshold it cannot decide, from the range's raw events. */
  async function list<T extends object>(
    rollupSql: string,
    rawSql: (events: string) => string,
    range: AnalyticsRange,
    minSessions: number,
    limit: number,
  ): Promise<T[]> {
    const text = sessionsDecidable(minSessions) ? rollupSql : rawSql(await rangeSource(db, range))
    return [...(await db.unsafe<T[]>(text, [range.fromMs, range.toMs, minSessions, limit], { prepare: true }))]
  }

  return {
    /** The most frequent queries asked by at least minSessions sessions, most frequent first. */
    searches: (range: AnalyticsRange, minSessions: number, limit: number) =>
      list<SearchRow>(ROLLUP_SEARCHES_SQL, SEARCHES_SQL, range, minSessions, limit),

    /** The queries whose searches found nothing, with how many did. */
    noResults: (range: AnalyticsRange, minSessions: number, limit: number) =>
      list<QueryCount>(
        ROLLUP_COUNTED_SQL('no_result_count'),
        (events) => COUNTED_SQL(events, 'no_result_count'),
        range,
        minSessions,
        limit,
      ),

    /** The queries whose searches found results and got no click, with how many did. */
    noClicks: (range: AnalyticsRange, minSessions: number, limit: number) =>
      list<QueryCount>(
        ROLLUP_COUNTED_SQL('no_click_count'),
        (events) => COUNTED_SQL(events, 'no_click_count'),
        range,
        minSessions,
        limit,
      ),

    /** Clicks of the range by the rank clicked: 1 to 10, 11 to 20, 21 and above. */
    async clickPositions(range: AnalyticsRange): Promise<PositionBucket[]> {
      return [...(await db.unsafe<PositionBucket[]>(POSITIONS_SQL, [range.fromMs, range.toMs], { prepare: true }))]
    },

    /** One point per period (periodMs: a day or an hour) of the range, from its start. */
    async series(range: AnalyticsRange, periodMs: number): Promise<SeriesPoint[]> {
      const rows = await db.unsafe<
        { start_ms: string; total_queries: number; zero_result_queries: number; queries_with_click: number }[]
      >(SERIES_SQL, [range.fromMs, range.toMs, periodMs], { prepare: true })
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

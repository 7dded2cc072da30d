// SQL of the docs-search analytics rollup (migration 0016): the hours that ingest or an erasure
// touched are recomputed from the raw events, with every hour the rollup holds for a query id
// found in them (docs_search_analytics_ids, kept by the refresh itself, wherever the events are).
// A query id whose searches and clicks lie in one UTC day is settled into the per-hour rows (a
// range of whole days holds all of it or none); one spanning days goes to the spanning tables,
// paired when a range is read (telemetry-analytics.ts).
import type { ReservedSql, Sql } from '../db/client.js'
import { eventsSource, NORMALISED_QUERY_SQL, SESSIONS_KEPT } from './telemetry-analytics.js'

const HOUR_MS = 3_600_000
const DAY_MS = 86_400_000
const SEARCH_OR_CLICK = `event in ('search_query', 'search_result_click')`

// $1: the hours logged, $2: the query ids of erased events. Every hour the rollup holds for the
// query ids of the logged hours' searches and clicks, and for the erased ids (those ids' events
// may have changed: a search, a click or an erasure in one hour changes what the id's events in
// its other hours count).
const LINKED_HOURS_SQL = (EVENTS: string) => `
  with logged(hour_ms) as (select distinct unnest($1::bigint[])),
  ids as (
    select e.query_id
    from logged l
    cross join lateral (
      select query_id from ${EVENTS} as events
      where emitted_at_ms >= l.hour_ms and emitted_at_ms < l.hour_ms + ${HOUR_MS} and ${SEARCH_OR_CLICK} and query_id <> ''
    ) e
    union
    select unnest($2::text[])
  )
  select distinct unnest(s.hours) as hour_ms
  from ids join docs_search_analytics_ids s using (query_id)`

// $1: the hours to recompute. The hours outside them that the rollup holds for the ids found in
// them: where the recompute reads those ids' other events (an archived day is read only if one
// of them lies in it).
const FAR_HOURS_SQL = `
  select distinct h as hour_ms
  from docs_search_analytics_ids s, unnest(s.hours) h
  where s.hours && $1::bigint[] and h <> all($1::bigint[])`

// $1: the hours to recompute (their rows deleted before). `ev`: their searches and clicks;
// `id_hours`: per query id found there, every hour holding its events (those the rollup held
// outside $1, and its hours in $1 as read now), written back to docs_search_analytics_ids; an id
// with events in more than one hour is read whole (`far`, through the query id index, or the
// archived days' tables); per id, whether it stays within one day and has a click.
const RECOMPUTE_SQL = (EVENTS: string) => `
  with target(hour_ms) as (select distinct unnest($1::bigint[])),
  ev as materialized (
    select t.hour_ms, e.*
    from target t
    cross join lateral (
      select event, query_id, results_count, result_rank, session_id, emitted_at_ms,
             case when event = 'search_query' then ${NORMALISED_QUERY_SQL} end as query
      from ${EVENTS} as events
      where emitted_at_ms >= t.hour_ms and emitted_at_ms < t.hour_ms + ${HOUR_MS} and ${SEARCH_OR_CLICK}
    ) e
  ),
  id_hours as materialized (
    select i.query_id,
           array(select h from unnest(coalesce(s.hours, '{}'::bigint[])) h where h <> all($1::bigint[])
                 union select unnest(i.hours) order by 1) as hours
    from (select query_id, array_agg(distinct hour_ms) as hours from ev where query_id <> '' group by query_id) i
    left join docs_search_analytics_ids s using (query_id)
  ),
  ids_written as (
    insert into docs_search_analytics_ids as s (query_id, hours)
    select query_id, hours from id_hours
    on conflict (query_id) do update set hours = excluded.hours
  ),
  far as materialized (
    select e.query_id, e.event, e.emitted_at_ms, case when e.event = 'search_query' then ${NORMALISED_QUERY_SQL} end as query
    from (select query_id from id_hours where cardinality(hours) > 1) o
    join ${EVENTS} e on e.query_id = o.query_id
    where e.${SEARCH_OR_CLICK}
  ),
  all_ev as (
    select ev.query_id, ev.event, ev.emitted_at_ms, ev.query
    from ev join id_hours i on i.query_id = ev.query_id
    where cardinality(i.hours) = 1
    union all
    select query_id, event, emitted_at_ms, query from far
  ),
  ids as (
    select query_id,
           min(emitted_at_ms) / 86400000 = max(emitted_at_ms) / 86400000 as one_day,
           bool_or(event = 'search_result_click') as clicked
    from all_ev group by query_id
  ),
  id_queries as (select distinct query_id, query from all_ev where event = 'search_query'),
  searches as (
    select ev.*, coalesce(i.one_day, true) as one_day, coalesce(i.clicked, false) as clicked
    from ev left join ids i on i.query_id = ev.query_id and ev.query_id <> ''
    where ev.event = 'search_query'
  ),
  clicks as (
    select ev.*, i.one_day
    from ev left join ids i on i.query_id = ev.query_id and ev.query_id <> ''
    where ev.event = 'search_result_click'
  ),
  per_query as (
    select hour_ms, query, count(*) as searches,
           count(*) filter (where results_count = 0) as no_results,
           count(*) filter (where query_id <> '' and one_day and clicked) as with_click,
           count(*) filter (where results_count > 0 and (query_id = '' or (one_day and not clicked))) as no_click,
           count(*) filter (where session_id = '') as unnamed,
           (array_agg(distinct session_id order by session_id) filter (where session_id <> ''))[1:${SESSIONS_KEPT}] as sessions
    from searches group by 1, 2
  ),
  per_query_ranks as (
    select c.hour_ms, q.query, count(*) as ranked_clicks, sum(c.result_rank) as rank_sum
    from clicks c join id_queries q on q.query_id = c.query_id
    where c.query_id <> '' and c.one_day and c.result_rank > 0
    group by 1, 2
  ),
  hours_written as (
    insert into docs_search_analytics_hours
      (hour_ms, query, searches, no_results, with_click, no_click, unnamed, sessions, ranked_clicks, rank_sum)
    select hour_ms, query, coalesce(p.searches, 0), coalesce(p.no_results, 0), coalesce(p.with_click, 0),
           coalesce(p.no_click, 0), coalesce(p.unnamed, 0), coalesce(p.sessions, '{}'),
           coalesce(r.ranked_clicks, 0), coalesce(r.rank_sum, 0)
    from per_query p full join per_query_ranks r using (hour_ms, query)
  ),
  spanning_searches as (
    insert into docs_search_analytics_spanning_searches (hour_ms, query_id, query, searches, with_results)
    select hour_ms, query_id, query, count(*), count(*) filter (where results_count > 0)
    from searches where query_id <> '' and not one_day
    group by 1, 2, 3
  ),
  spanning_clicks as (
    insert into docs_search_analytics_spanning_clicks (hour_ms, query_id, clicks, ranked_clicks, rank_sum)
    select hour_ms, query_id, count(*), count(*) filter (where result_rank > 0), coalesce(sum(result_rank) filter (where result_rank > 0), 0)
    from clicks where query_id <> '' and not one_day
    group by 1, 2
  )
  insert into docs_search_analytics_ranks (hour_ms, from_rank, clicks)
  select hour_ms, case when result_rank <= 10 then result_rank when result_rank <= 20 then 11 else 21 end, count(*)
  from clicks where result_rank > 0
  group by 1, 2`

// $1: the days whose hours changed, summed again; their session ids merged (the first
// SESSIONS_KEPT of the hours' ones: all of them, or as many as a threshold up to SESSIONS_KEPT needs).
const DAYS_SQL = `
  with sums as (
    select d.day_ms, h.query, sum(searches) as searches, sum(no_results) as no_results, sum(with_click) as with_click,
           sum(no_click) as no_click, sum(unnamed) as unnamed, sum(ranked_clicks) as ranked_clicks, sum(rank_sum) as rank_sum
    from unnest($1::bigint[]) d(day_ms)
    join docs_search_analytics_hours h on h.hour_ms >= d.day_ms and h.hour_ms < d.day_ms + ${DAY_MS}
    group by 1, 2
  ),
  sessions as (
    select d.day_ms, h.query, (array_agg(distinct s order by s))[1:${SESSIONS_KEPT}] as sessions
    from unnest($1::bigint[]) d(day_ms)
    join docs_search_analytics_hours h on h.hour_ms >= d.day_ms and h.hour_ms < d.day_ms + ${DAY_MS}
    cross join unnest(h.sessions) s
    group by 1, 2
  )
  insert into docs_search_analytics_days
    (day_ms, query, searches, no_results, with_click, no_click, unnamed, sessions, ranked_clicks, rank_sum)
  select day_ms, query, searches, no_results, with_click, no_click, unnamed, coalesce(sessions, '{}'), ranked_clicks, rank_sum
  from sums left join sessions using (day_ms, query)`

const ROLLUP_TABLES = [
  'docs_search_analytics_hours',
  'docs_search_analytics_spanning_searches',
  'docs_search_analytics_spanning_clicks',
  'docs_search_analytics_ranks',
] as const

/** Logged hours taken by one refresh: after an upgrade every stored hour is logged, and one
 * transaction over all of them would hold its locks and snapshot for minutes. */
export const HOURS_PER_REFRESH = 6

export interface RefreshFigures {
  /** hours logged by ingest or erasure since the last refresh */
  logged: number
  /** hours recomputed (the logged ones and those sharing a query id with them) */
  recomputed: number
}

/**
 * One refresh of at most HOURS_PER_REFRESH logged hours (the earliest), in one transaction (on a pool, or on a reserved connection that holds the refresh
 * lock): takes the log's rows (a batch that has not committed keeps its rows for the next
 * refresh; one that has is seen by the statements after), then recomputes their hours and the
 * hours linked to them by a query id.
 */
export async function refreshAnalyticsRollup(sql: Sql | ReservedSql): Promise<RefreshFigures> {
  if ('begin' in sql && typeof sql.begin === 'function')
    return (sql as Sql).begin((tx) => refreshIn(tx)) as Promise<RefreshFigures>
  await sql.unsafe('begin')
  try {
    const figures = await refreshIn(sql)
    await sql.unsafe('commit')
    return figures
  } catch (err) {
    await sql.unsafe('rollback')
    throw err
  }
}

async function refreshIn(tx: Pick<Sql, 'unsafe'>): Promise<RefreshFigures> {
  // Hours of a busy site take longer than the pool's statement timeout (a request's bound).
  await tx.unsafe('set local statement_timeout = 0')
  const logged = await tx.unsafe<{ hour_ms: string; query_id: string }[]>(
    `delete from docs_search_analytics_dirty
     where hour_ms in (select distinct hour_ms from docs_search_analytics_dirty order by hour_ms limit ${HOURS_PER_REFRESH})
     returning hour_ms, query_id`,
  )
  if (logged.length === 0) return { logged: 0, recomputed: 0 }
  const loggedHours = [...new Set(logged.map((r) => Number(r.hour_ms)))]
  const erasedIds = [...new Set(logged.map((r) => r.query_id).filter((id) => id !== ''))]
  const linked = await tx.unsafe<{ hour_ms: string }[]>(
    LINKED_HOURS_SQL(await eventsSource(tx, overlapping(loggedHours))),
    [loggedHours, erasedIds],
  )
  const hours = [...new Set([...loggedHours, ...linked.map((r) => Number(r.hour_ms))])].sort((a, b) => a - b)
  for (const table of ROLLUP_TABLES) await tx.unsafe(`delete from ${table} where hour_ms = any($1::bigint[])`, [hours])
  // The erased ids keep only their other hours (those with events left in these hours get theirs
  // back from the recompute); an id left with none is forgotten.
  if (erasedIds.length > 0) {
    await tx.unsafe(
      `update docs_search_analytics_ids set hours = array(select h from unnest(hours) h where h <> all($1::bigint[]) order by h)
       where query_id = any($2::text[])`,
      [hours, erasedIds],
    )
    await tx.unsafe(`delete from docs_search_analytics_ids where query_id = any($1::text[]) and hours = '{}'`, [
      erasedIds,
    ])
  }
  const far = await tx.unsafe<{ hour_ms: string }[]>(FAR_HOURS_SQL, [hours])
  const read = [...hours, ...far.map((r) => Number(r.hour_ms))]
  await tx.unsafe(RECOMPUTE_SQL(await eventsSource(tx, overlapping(read))), [hours])
  const days = [...new Set(hours.map((hour) => Math.floor(hour / DAY_MS) * DAY_MS))]
  await tx.unsafe(`delete from docs_search_analytics_days where day_ms = any($1::bigint[])`, [days])
  await tx.unsafe(DAYS_SQL, [days])
  return { logged: loggedHours.length, recomputed: hours.length }
}

/** Deletes the rollup rows of the hours (and whole days) before the one of `beforeMs` (retention: no event is kept before it). */
export async function deleteAnalyticsRollupBefore(sql: Pick<Sql, 'unsafe'>, beforeMs: number): Promise<number> {
  beforeMs = Math.floor(beforeMs / HOUR_MS) * HOUR_MS
  let deleted = 0
  for (const table of ROLLUP_TABLES)
    deleted += (await sql.unsafe(`delete from ${table} where hour_ms < $1::bigint`, [beforeMs])).count
  const days = await sql.unsafe(`delete from docs_search_analytics_days where day_ms + ${DAY_MS} <= $1::bigint`, [
    beforeMs,
  ])
  // An id whose last hour is gone; one with later hours keeps its earlier ones (recomputing an
  // hour without events writes nothing).
  const ids = await sql.unsafe(`delete from docs_search_analytics_ids where hours[cardinality(hours)] < $1::bigint`, [
    beforeMs,
  ])
  return deleted + days.count + ids.count
}

/** Whether an archived day (its start, epoch ms) holds one of the hours. */
const overlapping = (hours: number[]) => (dayMs: number) => hours.some((hour) => hour >= dayMs && hour < dayMs + DAY_MS)

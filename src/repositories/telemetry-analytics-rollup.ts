// SQL of the docs-search analytics rollup (migration 0016): the 5-minute slices that ingest or an
// erasure touched are recomputed from the raw events, with every slice the rollup holds for a
// query id found in them (docs_search_analytics_ids, kept by the refresh itself, wherever the
// events are); then their hours are summed from the slices, and their days from the hours.
// A query id whose searches and clicks lie in one UTC day is settled into the per-slice rows (a
// range of whole days holds all of it or none); one spanning days goes to the spanning tables,
// paired when a range is read (telemetry-analytics.ts).
import type { ReservedSql, Sql } from '../db/client.js'
import { eventsSource, NORMALISED_QUERY_SQL, SESSIONS_KEPT } from './telemetry-analytics.js'

const HOUR_MS = 3_600_000
/** The unit the refresh recomputes: 5 minutes (docs/docs-search-analytics.md, Cost). */
export const SLICE_MS = 300_000
const DAY_MS = 86_400_000
const SEARCH_OR_CLICK = `event in ('search_query', 'search_result_click')`

// $1: the slices logged, $2: the query ids of erased events. Every slice the rollup holds for the
// query ids of the logged slices' searches and clicks, and for the erased ids (those ids' events
// may have changed: a search, a click or an erasure in one slice changes what the id's events in
// its other slices count).
const LINKED_SLICES_SQL = (EVENTS: string) => `
  with logged(slice_ms) as (select distinct unnest($1::bigint[])),
  ids as (
    select e.query_id
    from logged l
    cross join lateral (
      select query_id from ${EVENTS} as events
      where emitted_at_ms >= l.slice_ms and emitted_at_ms < l.slice_ms + ${SLICE_MS} and ${SEARCH_OR_CLICK} and query_id <> ''
    ) e
    union
    select unnest($2::text[])
  )
  select distinct unnest(s.slices) as slice_ms
  from docs_search_analytics_ids s where s.query_id = any(array(select query_id from ids))`

// $1: the slices to recompute. The slices outside them that the rollup holds for the ids found in
// them: where the recompute reads those ids' other events (an archived day is read only if one
// of them lies in it).
const FAR_SLICES_SQL = `
  select distinct h as slice_ms
  from docs_search_analytics_ids s, unnest(s.slices) h
  where s.slices && $1::bigint[] and h <> all($1::bigint[])`

// $1: the slices to recompute (their rows deleted before); $2: the slices linked to them by a
// query id, where only those ids' share changes; $3: the query ids of erased events.
// `ev`: the searches and clicks of $1; `id_slices`: per query id found there, every slice holding
// its events (those the rollup held outside $1, and its slices in $1 as read now), written back
// to docs_search_analytics_ids; an id with events in more than one slice, or erased, is read whole
// (`far`, through the query id index, or the archived days' tables); per id, whether it stays
// within one day, has a click, and the queries it was asked as: `new_state`, beside `old_state`,
// what the rollup holds for it (the state its share of every slice was computed with).
const RECOMPUTE_SQL = (EVENTS: string) => `
  with target(slice_ms) as (select distinct unnest($1::bigint[])),
  ev as materialized (
    select t.slice_ms, e.*
    from target t
    cross join lateral (
      select event, query_id, results_count, result_rank, session_id, emitted_at_ms,
             case when event = 'search_query' then ${NORMALISED_QUERY_SQL} end as query
      from ${EVENTS} as events
      where emitted_at_ms >= t.slice_ms and emitted_at_ms < t.slice_ms + ${SLICE_MS} and ${SEARCH_OR_CLICK}
    ) e
  ),
  id_slices as materialized (
    select i.query_id,
           array(select h from unnest(coalesce(s.slices, '{}'::bigint[])) h where h <> all($1::bigint[])
                 union select unnest(i.slices) order by 1) as slices
    from (select query_id, array_agg(distinct slice_ms) as slices from ev where query_id <> '' group by query_id) i
    left join lateral (select slices from docs_search_analytics_ids s where s.query_id = i.query_id) s on true
  ),
  far as materialized (
    select e.query_id, e.event, e.emitted_at_ms, (e.emitted_at_ms / ${SLICE_MS}) * ${SLICE_MS} as slice_ms,
           e.results_count, e.result_rank,
           case when e.event = 'search_query' then ${NORMALISED_QUERY_SQL} end as query
    from (select query_id from id_slices where cardinality(slices) > 1 union select unnest($3::text[])) o
    join ${EVENTS} e on e.query_id = o.query_id
    where e.${SEARCH_OR_CLICK}
  ),
  all_ev as (
    select ev.query_id, ev.event, ev.emitted_at_ms, ev.query
    from ev join id_slices i on i.query_id = ev.query_id
    where cardinality(i.slices) = 1
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
  new_state as materialized (
    select i.query_id, i.one_day, i.clicked, coalesce(q.queries, '{}') as queries
    from ids i
    left join (select query_id, array_agg(query order by query) as queries from id_queries group by query_id) q using (query_id)
  ),
  old_state as materialized (
    select s.query_id, s.one_day, s.clicked, s.queries
    from docs_search_analytics_ids s where s.query_id = any(array(select query_id from ids))
  ),
  ids_written as (
    insert into docs_search_analytics_ids as s (query_id, slices, one_day, clicked, queries)
    select n.query_id, coalesce(i.slices, '{}'), n.one_day, n.clicked, n.queries
    from new_state n left join id_slices i using (query_id)
    where i.query_id is not null or n.query_id in (select query_id from old_state)
    on conflict (query_id) do update set
      slices = case when excluded.slices = '{}' then s.slices else excluded.slices end,
      one_day = excluded.one_day, clicked = excluded.clicked, queries = excluded.queries
  ),
  -- The linked slices: the ids' events there, and their share of the slice rows under the old and
  -- the new state (a one-day id's searches with or without a click, its ranked clicks once per
  -- query), the difference added to the rows.
  lev as (select * from far where slice_ms = any($2::bigint[])),
  states as (
    select query_id, 1 as sign, one_day, clicked, queries from new_state
    union all
    select query_id, -1, one_day, clicked, queries from old_state
  ),
  shares as (
    select st.sign, l.slice_ms, l.query, st.clicked::int as with_click,
           (not st.clicked and l.results_count > 0)::int as no_click, 0 as ranked_clicks, 0 as rank_sum
    from lev l join states st using (query_id)
    where l.event = 'search_query' and st.one_day
    union all
    select st.sign, l.slice_ms, q.query, 0, 0, 1, l.result_rank
    from lev l join states st using (query_id) cross join unnest(st.queries) q(query)
    where l.event = 'search_result_click' and l.result_rank > 0 and st.one_day
  ),
  deltas as (
    select slice_ms, query, sum(sign * with_click) as with_click, sum(sign * no_click) as no_click,
           sum(sign * ranked_clicks) as ranked_clicks, sum(sign * rank_sum) as rank_sum
    from shares group by 1, 2
  ),
  slices_changed as (
    insert into docs_search_analytics_slices as s
      (slice_ms, query, searches, no_results, with_click, no_click, unnamed, sessions, ranked_clicks, rank_sum)
    select slice_ms, query, 0, 0, with_click, no_click, 0, '{}', ranked_clicks, rank_sum
    from deltas where with_click <> 0 or no_click <> 0 or ranked_clicks <> 0 or rank_sum <> 0
    on conflict (slice_ms, query) do update set
      with_click = s.with_click + excluded.with_click, no_click = s.no_click + excluded.no_click,
      ranked_clicks = s.ranked_clicks + excluded.ranked_clicks, rank_sum = s.rank_sum + excluded.rank_sum
  ),
  -- an id that now spans days leaves the slice rows for the spanning ones there, and back
  moved as (
    select n.query_id, n.one_day from new_state n join old_state o using (query_id) where n.one_day <> o.one_day
  ),
  spanning_searches_out as (
    delete from docs_search_analytics_spanning_searches
    where slice_ms = any($2::bigint[]) and query_id in (select query_id from moved where one_day)
  ),
  spanning_clicks_out as (
    delete from docs_search_analytics_spanning_clicks
    where slice_ms = any($2::bigint[]) and query_id in (select query_id from moved where one_day)
  ),
  spanning_searches_in as (
    insert into docs_search_analytics_spanning_searches (slice_ms, query_id, query, searches, with_results)
    select slice_ms, query_id, query, count(*), count(*) filter (where results_count > 0)
    from lev where event = 'search_query' and query_id in (select query_id from moved where not one_day)
    group by 1, 2, 3
  ),
  spanning_clicks_in as (
    insert into docs_search_analytics_spanning_clicks (slice_ms, query_id, clicks, ranked_clicks, rank_sum)
    select slice_ms, query_id, count(*), count(*) filter (where result_rank > 0),
           coalesce(sum(result_rank) filter (where result_rank > 0), 0)
    from lev where event = 'search_result_click' and query_id in (select query_id from moved where not one_day)
    group by 1, 2
  ),
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
    select slice_ms, query, count(*) as searches,
           count(*) filter (where results_count = 0) as no_results,
           count(*) filter (where query_id <> '' and one_day and clicked) as with_click,
           count(*) filter (where results_count > 0 and (query_id = '' or (one_day and not clicked))) as no_click,
           count(*) filter (where session_id = '') as unnamed,
           (array_agg(distinct session_id order by session_id) filter (where session_id <> ''))[1:${SESSIONS_KEPT}] as sessions
    from searches group by 1, 2
  ),
  per_query_ranks as (
    select c.slice_ms, q.query, count(*) as ranked_clicks, sum(c.result_rank) as rank_sum
    from clicks c join id_queries q on q.query_id = c.query_id
    where c.query_id <> '' and c.one_day and c.result_rank > 0
    group by 1, 2
  ),
  slices_written as (
    insert into docs_search_analytics_slices
      (slice_ms, query, searches, no_results, with_click, no_click, unnamed, sessions, ranked_clicks, rank_sum)
    select slice_ms, query, coalesce(p.searches, 0), coalesce(p.no_results, 0), coalesce(p.with_click, 0),
           coalesce(p.no_click, 0), coalesce(p.unnamed, 0), coalesce(p.sessions, '{}'),
           coalesce(r.ranked_clicks, 0), coalesce(r.rank_sum, 0)
    from per_query p full join per_query_ranks r using (slice_ms, query)
  ),
  spanning_searches as (
    insert into docs_search_analytics_spanning_searches (slice_ms, query_id, query, searches, with_results)
    select slice_ms, query_id, query, count(*), count(*) filter (where results_count > 0)
    from searches where query_id <> '' and not one_day
    group by 1, 2, 3
  ),
  spanning_clicks as (
    insert into docs_search_analytics_spanning_clicks (slice_ms, query_id, clicks, ranked_clicks, rank_sum)
    select slice_ms, query_id, count(*), count(*) filter (where result_rank > 0), coalesce(sum(result_rank) filter (where result_rank > 0), 0)
    from clicks where query_id <> '' and not one_day
    group by 1, 2
  )
  insert into docs_search_analytics_ranks (slice_ms, from_rank, clicks)
  select slice_ms, case when result_rank <= 10 then result_rank when result_rank <= 20 then 11 else 21 end, count(*)
  from clicks where result_rank > 0
  group by 1, 2`

/**
 * $1: the periods (hours or days) whose finer rows changed, summed again from them; their session
 * ids merged (the first SESSIONS_KEPT of the finer rows' ones: all of them, or as many as a
 * threshold up to SESSIONS_KEPT needs). Hours are summed from slices (the hourly series reads
 * them), days from hours (the lists and the daily series).
 */
const resummed = (into: string, period: string, from: string, fromPeriod: string, periodMs: number) => `
  with sums as (
    select p.${period}, f.query, sum(searches) as searches, sum(no_results) as no_results, sum(with_click) as with_click,
           sum(no_click) as no_click, sum(unnamed) as unnamed, sum(ranked_clicks) as ranked_clicks, sum(rank_sum) as rank_sum
    from unnest($1::bigint[]) p(${period})
    join ${from} f on f.${fromPeriod} >= p.${period} and f.${fromPeriod} < p.${period} + ${periodMs}
    group by 1, 2
  ),
  sessions as (
    select p.${period}, f.query, (array_agg(distinct id order by id))[1:${SESSIONS_KEPT}] as sessions
    from unnest($1::bigint[]) p(${period})
    join ${from} f on f.${fromPeriod} >= p.${period} and f.${fromPeriod} < p.${period} + ${periodMs}
    cross join unnest(f.sessions) id
    group by 1, 2
  )
  insert into ${into}
    (${period}, query, searches, no_results, with_click, no_click, unnamed, sessions, ranked_clicks, rank_sum)
  select ${period}, query, searches, no_results, with_click, no_click, unnamed, coalesce(sessions, '{}'), ranked_clicks, rank_sum
  from sums left join sessions using (${period}, query)`

const HOURS_SQL = resummed(
  'docs_search_analytics_hours',
  'hour_ms',
  'docs_search_analytics_slices',
  'slice_ms',
  HOUR_MS,
)
const DAYS_SQL = resummed('docs_search_analytics_days', 'day_ms', 'docs_search_analytics_hours', 'hour_ms', DAY_MS)

// $1: the days whose slices changed: their clicks per rank bucket summed again.
const RANK_DAYS_SQL = `
  insert into docs_search_analytics_rank_days (day_ms, from_rank, clicks)
  select d.day_ms, r.from_rank, sum(r.clicks)
  from unnest($1::bigint[]) d(day_ms)
  join docs_search_analytics_ranks r on r.slice_ms >= d.day_ms and r.slice_ms < d.day_ms + ${DAY_MS}
  group by 1, 2`

/** What the refresh recomputes per slice. */
const SLICE_TABLES = [
  'docs_search_analytics_slices',
  'docs_search_analytics_spanning_searches',
  'docs_search_analytics_spanning_clicks',
  'docs_search_analytics_ranks',
] as const

/** Logged slices taken by one refresh (an hour's): after an upgrade every stored slice is
 * logged, and one transaction over all of them would hold its locks and snapshot for minutes. */
export const SLICES_PER_REFRESH = 12

export interface RefreshFigures {
  /** slices logged by ingest or erasure since the last refresh */
  logged: number
  /** slices recomputed whole (the logged ones) */
  recomputed: number
  /** slices where only the share of the logged slices' query ids was recomputed */
  linked: number
}

/**
 * One refresh of at most SLICES_PER_REFRESH logged slices (those an erasure logged first, then the
 * latest: after an upgrade or a burst the recent days come first), in one transaction (on
 * a pool, or on a reserved connection that holds the refresh lock): takes the log's rows (a batch
 * that has not committed keeps its rows for the next refresh; one that has is seen by the
 * statements after), then recomputes their slices and the slices linked to them by a query id,
 * and sums their hours and days again.
 */
export function refreshAnalyticsRollup(sql: Sql | ReservedSql): Promise<RefreshFigures> {
  return inTransaction(sql, refreshIn)
}

/** `work` in one transaction: on a pool, or on a reserved connection (begin and commit sent on it). */
async function inTransaction<T>(sql: Sql | ReservedSql, work: (tx: Pick<Sql, 'unsafe'>) => Promise<T>): Promise<T> {
  if ('begin' in sql && typeof sql.begin === 'function') return (sql as Sql).begin((tx) => work(tx)) as Promise<T>
  await sql.unsafe('begin')
  try {
    const result = await work(sql)
    await sql.unsafe('commit')
    return result
  } catch (err) {
    await sql.unsafe('rollback')
    throw err
  }
}

async function refreshIn(tx: Pick<Sql, 'unsafe'>): Promise<RefreshFigures> {
  // Slices of a busy site can take longer than the pool's statement timeout (a request's bound).
  await tx.unsafe('set local statement_timeout = 0')
  const logged = await tx.unsafe<{ slice_ms: string; query_id: string }[]>(
    `delete from docs_search_analytics_dirty
     where slice_ms in (select slice_ms from docs_search_analytics_dirty group by slice_ms
                        order by bool_or(erased) desc, slice_ms desc limit ${SLICES_PER_REFRESH})
     returning slice_ms, query_id`,
  )
  if (logged.length === 0) return { logged: 0, recomputed: 0, linked: 0 }
  const loggedSlices = [...new Set(logged.map((r) => Number(r.slice_ms)))].sort((a, b) => a - b)
  const erasedIds = [...new Set(logged.map((r) => r.query_id).filter((id) => id !== ''))]
  // The other slices of the ids found in the logged ones: only those ids' share of them changes,
  // unless a slice is itself still in the log (a later refresh recomputes it whole).
  const linkedRows = await tx.unsafe<{ slice_ms: string }[]>(
    LINKED_SLICES_SQL(await eventsSource(tx, overlapping(loggedSlices))),
    [loggedSlices, erasedIds],
  )
  const candidates = linkedRows.map((r) => Number(r.slice_ms)).filter((slice) => !loggedSlices.includes(slice))
  const stillLogged = new Set(
    (
      await tx.unsafe<{ slice_ms: string }[]>(
        `select distinct slice_ms from docs_search_analytics_dirty where slice_ms = any($1::bigint[])`,
        [candidates],
      )
    ).map((r) => Number(r.slice_ms)),
  )
  const linked = [...new Set(candidates.filter((slice) => !stillLogged.has(slice)))].sort((a, b) => a - b)
  for (const table of SLICE_TABLES)
    await tx.unsafe(`delete from ${table} where slice_ms = any($1::bigint[])`, [loggedSlices])
  // The erased ids keep only their other slices (those with events left in the logged slices get
  // theirs back from the recompute); an id left with none is forgotten.
  if (erasedIds.length > 0) {
    await tx.unsafe(
      `update docs_search_analytics_ids set slices = array(select h from unnest(slices) h where h <> all($1::bigint[]) order by h)
       where query_id = any($2::text[])`,
      [loggedSlices, erasedIds],
    )
    await tx.unsafe(`delete from docs_search_analytics_ids where query_id = any($1::text[]) and slices = '{}'`, [
      erasedIds,
    ])
  }
  const far = await tx.unsafe<{ slice_ms: string }[]>(FAR_SLICES_SQL, [loggedSlices])
  const read = [...loggedSlices, ...linked, ...far.map((r) => Number(r.slice_ms))]
  await tx.unsafe(RECOMPUTE_SQL(await eventsSource(tx, overlapping(read))), [loggedSlices, linked, erasedIds])
  const slices = [...loggedSlices, ...linked]
  const hours = [...new Set(slices.map((slice) => Math.floor(slice / HOUR_MS) * HOUR_MS))]
  await tx.unsafe(`delete from docs_search_analytics_hours where hour_ms = any($1::bigint[])`, [hours])
  await tx.unsafe(HOURS_SQL, [hours])
  const days = [...new Set(slices.map((slice) => Math.floor(slice / DAY_MS) * DAY_MS))]
  await tx.unsafe(`delete from docs_search_analytics_days where day_ms = any($1::bigint[])`, [days])
  await tx.unsafe(DAYS_SQL, [days])
  await tx.unsafe(`delete from docs_search_analytics_rank_days where day_ms = any($1::bigint[])`, [days])
  await tx.unsafe(RANK_DAYS_SQL, [days])
  return { logged: loggedSlices.length, recomputed: loggedSlices.length, linked: linked.length }
}

/** How many slices the log holds (what the next refreshes have to recompute). */
export async function loggedSlices(sql: Sql | ReservedSql): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select count(distinct slice_ms)::int as n from docs_search_analytics_dirty`
  return row!.n
}

/** Deletes the rollup rows of the slices, hours and whole days before the hour of `beforeMs` (retention: no event is kept before it). */
export function deleteAnalyticsRollupBefore(sql: Sql | ReservedSql, beforeMs: number): Promise<number> {
  return inTransaction(sql, (tx) => deleteBefore(tx, Math.floor(beforeMs / HOUR_MS) * HOUR_MS))
}

async function deleteBefore(sql: Pick<Sql, 'unsafe'>, beforeMs: number): Promise<number> {
  let deleted = 0
  for (const table of SLICE_TABLES)
    deleted += (await sql.unsafe(`delete from ${table} where slice_ms < $1::bigint`, [beforeMs])).count
  const hours = await sql.unsafe(`delete from docs_search_analytics_hours where hour_ms < $1::bigint`, [beforeMs])
  let days = 0
  for (const table of ['docs_search_analytics_days', 'docs_search_analytics_rank_days'])
    days += (await sql.unsafe(`delete from ${table} where day_ms + ${DAY_MS} <= $1::bigint`, [beforeMs])).count
  // An id whose last slice is gone; one with later slices keeps its earlier ones (recomputing a
  // slice without events writes nothing).
  const ids = await sql.unsafe(`delete from docs_search_analytics_ids where slices[cardinality(slices)] < $1::bigint`, [
    beforeMs,
  ])
  return deleted + hours.count + days + ids.count
}

/** Whether an archived day (its start, epoch ms) holds one of the slices. */
const overlapping = (slices: number[]) => (dayMs: number) =>
  slices.some((slice) => slice >= dayMs && slice < dayMs + DAY_MS)

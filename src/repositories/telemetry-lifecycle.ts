// SQL of the docs-search events' lifecycle: their daily partitions (created ahead, archived past
// the KPI horizon, dropped by retention), and the rollup rows no KPI window can reach any more.
// Partition DDL runs with a short lock_timeout: it needs a brief lock that ingest also takes,
// and waiting in the lock queue would hold every insert behind it. The caller retries.
// `sql` is one reserved connection (src/telemetry/lifecycle.ts holds the replicas' advisory lock on it).
import type { Db, Sql } from '../db/client.js'

export const DAY_MS = 86_400_000
const PARENT = 'docs_search_events'
export const DEFAULT_PARTITION = 'docs_search_events_default'

export interface Partition {
  name: string
  /** range [fromMs, toMs); null for MINVALUE / MAXVALUE; both null for the DEFAULT partition */
  fromMs: number | null
  toMs: number | null
  isDefault: boolean
  /** whether it has its session index (erasure) */
  hasSessionIndex: boolean
}

const yyyymmdd = (dayMs: number) => new Date(dayMs).toISOString().slice(0, 10).replaceAll('-', '')

/** The name of the daily partition that starts at `dayMs` (UTC). */
export function partitionName(dayMs: number): string {
  return `${PARENT}_${yyyymmdd(dayMs)}`
}

/**
 * A day past the KPI horizon leaves the partitioned table as `docs_search_archive_YYYYMMDD`: its
 * events and session index (erasure) kept until retention, its KPI indexes dropped. Not a
 * `docs_search_events_` name, so no release drops it as a detached day left by a cut-short drop.
 */
export const ARCHIVE_PREFIX = 'docs_search_archive_'
export const archiveName = (dayMs: number) => `${ARCHIVE_PREFIX}${yyyymmdd(dayMs)}`
const ARCHIVE = /^docs_search_archive_(\d{4})(\d{2})(\d{2})$/
/** The day (UTC, epoch ms) an archive table holds, or null for another name. */
export function archiveDayMs(name: string): number | null {
  const m = ARCHIVE.exec(name)
  return m ? Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) : null
}
/** The catalogue's archive tables (a pattern for `relname ~`). */
const ARCHIVE_PATTERN = '^docs_search_archive_[0-9]{8}$'

/** The names of the archive tables, oldest first (erasure reaches them; any connection or transaction). */
export async function archiveNames(sql: Pick<Sql, 'unsafe'>): Promise<string[]> {
  const rows = await sql.unsafe<{ name: string }[]>(
    `select relname as name from pg_class
     where relnamespace = current_schema()::regnamespace and relkind = 'r' and relname ~ $1 order by relname`,
    [ARCHIVE_PATTERN],
  )
  return rows.map((r) => r.name)
}

// Every event of the day (also those without a session, '' deduplicated): erasure finds a
// session's events through it, and retention counts a day's events from it.
const sessionIndex = (partition: string) => `${partition}_session`
// Table names come from partitionName(), archiveName() or the catalogue; checked before they go into DDL.
const SAFE_NAME = /^docs_search_(events|archive)_[a-z0-9_]{1,40}$/

function ident(name: string): string {
  if (!SAFE_NAME.test(name)) throw new Error(`not a docs_search_events partition or archive name: ${name}`)
  return `"${name}"`
}

const int = (n: number) => {
  if (!Number.isSafeInteger(n)) throw new Error(`not an integer: ${n}`)
  return String(n)
}

const BOUND = /FROM \((MINVALUE|'?(-?\d+)'?)\) TO \((MAXVALUE|'?(-?\d+)'?)\)/

/** A lock that another session holds longer than lock_timeout (55P03). */
export const isLockTimeout = (err: unknown) => (err as { code?: string }).code === '55P03'

/** The statement that counts a day table's events (a test reads its plan). */
export const countRowsStatement = (name: string) => `select count(*) as n from ${ident(name)}`

export function createTelemetryLifecycleRepository(sql: Db, lockTimeoutMs = 200) {
  const lockTimeout = `${Math.max(1, Math.round(lockTimeoutMs))}ms`

  /** Takes a partition out of the table (catalogue only), within lock_timeout or not at all. */
  async function detachPartition(name: string): Promise<void> {
    await sql.unsafe(
      `set local lock_timeout = '${lockTimeout}'; alter table ${PARENT} detach partition ${ident(name)};`,
    )
  }

  /** The archive tables, oldest first, with the number of indexes each has besides its session index. */
  async function archives(): Promise<{ name: string; dayMs: number; kpiIndexes: number; hasSessionIndex: boolean }[]> {
    const rows = await sql<{ name: string; kpi_indexes: number; has_session_index: boolean }[]>`
      select c.relname as name,
             (select count(*)::int from pg_index x join pg_class ic on ic.oid = x.indexrelid
              where x.indrelid = c.oid and ic.relname <> c.relname || '_session') as kpi_indexes,
             exists (select 1 from pg_index x join pg_class ic on ic.oid = x.indexrelid
                     where x.indrelid = c.oid and ic.relname = c.relname || '_session' and x.indisvalid) as has_session_index
      from pg_class c
      where c.relnamespace = current_schema()::regnamespace and c.relkind = 'r' and c.relname ~ ${ARCHIVE_PATTERN}
      order by c.relname`
    return rows.map((r) => ({
      name: r.name,
      dayMs: archiveDayMs(r.name)!,
      kpiIndexes: r.kpi_indexes,
      hasSessionIndex: r.has_session_index,
    }))
  }

  /** Drops a day table that is no longer a partition. */
  async function dropDetached(name: string): Promise<void> {
    await sql.unsafe(`drop table if exists ${ident(name)}`)
  }

  return {
    async partitions(): Promise<Partition[]> {
      const rows = await sql<{ name: string; bound: string; has_session_index: boolean }[]>`
        select c.relname as name, pg_get_expr(c.relpartbound, c.oid) as bound,
               exists (select 1 from pg_index x join pg_class ic on ic.oid = x.indexrelid
                       where x.indrelid = c.oid and ic.relname = c.relname || '_session' and x.indisvalid) as has_session_index
        from pg_inherits i join pg_class c on c.oid = i.inhrelid
        where i.inhparent = ${PARENT}::regclass`
      return rows.map((r) => {
        const m = BOUND.exec(r.bound)
        return {
          name: r.name,
          fromMs: m?.[2] === undefined ? null : Number(m[2]),
          toMs: m?.[4] === undefined ? null : Number(m[4]),
          isDefault: r.bound === 'DEFAULT',
          hasSessionIndex: r.has_session_index,
        }
      })
    },

    /**
     * Creates the partition [fromMs, toMs) with its indexes and attaches it (a lock on the parent
     * that inserts do not wait for). Events of that range already in the DEFAULT partition move
     * into it first, in the same transaction; the rollups counted them already.
     */
    async createPartition(name: string, fromMs: number, toMs: number): Promise<void> {
      const table = ident(name)
      // One simple-protocol message: its statements run as one transaction (an implicit block).
      await sql.unsafe(`
        set local lock_timeout = '${lockTimeout}';
        create table ${table} (like ${PARENT} including defaults including constraints);
        create index ${ident(sessionIndex(name))} on ${table} (session_id);
        with moved as (delete from ${DEFAULT_PARTITION} where emitted_at_ms >= ${int(fromMs)} and emitted_at_ms < ${int(toMs)} returning *)
        insert into ${table} select * from moved;
        alter table ${PARENT} attach partition ${table} for values from (${int(fromMs)}) to (${int(toMs)});`)
    },

    /** Adds the session index to a partition or archive without one (the table of the previous release; a failed build), without blocking writes. */
    async addSessionIndex(name: string): Promise<void> {
      // Outside any transaction (CONCURRENTLY), and longer than the pool's statement_timeout on a big table.
      await sql.unsafe(`set statement_timeout = 0`)
      try {
        // A build that failed (cancelled, a lock timeout) leaves an invalid index of that name,
        // which IF NOT EXISTS would keep for ever: it goes, and the index is built again.
        const [invalid] = await sql<{ invalid: boolean }[]>`
          select true as invalid from pg_index i join pg_class c on c.oid = i.indexrelid
          where c.relname = ${sessionIndex(name)} and c.relnamespace = current_schema()::regnamespace and not i.indisvalid`
        if (invalid) await sql.unsafe(`drop index concurrently if exists ${ident(sessionIndex(name))}`)
        await sql.unsafe(
          `create index concurrently if not exists ${ident(sessionIndex(name))} on ${ident(name)} (session_id)`,
        )
      } finally {
        await sql.unsafe(`reset statement_timeout`)
      }
    },

    /**
     * Number of events in a day table, counted before it is dropped (no lock that ingest waits
     * for). From an index, not the table: reading a day's gigabytes would also put them in the OS
     * page cache just before the drop, and freeing cached pages costs a drop as much again. On a
     * day vacuumed once closed (vacuumDay) the session index answers alone, without a heap fetch.
     */
    async countRows(name: string): Promise<number> {
      await sql.unsafe(`set enable_seqscan = off`)
      try {
        const [row] = await sql.unsafe<{ n: string }[]>(countRowsStatement(name))
        return Number(row!.n)
      } finally {
        await sql.unsafe(`reset enable_seqscan`)
      }
    },

    /** Partitions that took events since they were last vacuumed (the statistics lag the inserts by about a second). */
    async unvacuumed(): Promise<Set<string>> {
      const rows = await sql<{ name: string }[]>`
        select c.relname as name
        from pg_inherits i join pg_class c on c.oid = i.inhrelid
        join pg_stat_user_tables s on s.relid = c.oid
        where i.inhparent = ${PARENT}::regclass and s.n_ins_since_vacuum > 0`
      return new Set(rows.map((r) => r.name))
    },

    /**
     * Vacuums a closed day while its last pages are still in the cache: autovacuum runs on an
     * insert-only table only after it grew by a fifth, so a day's last hours would stay without
     * visibility-map bits, and an index-only scan of them (the KPIs' probes, the count above)
     * would fetch their heap pages. Takes no lock that ingest waits for.
     */
    async vacuumDay(name: string): Promise<void> {
      await sql.unsafe(`set statement_timeout = 0`)
      try {
        await sql.unsafe(`vacuum (skip_locked) ${ident(name)}`)
      } finally {
        await sql.unsafe(`reset statement_timeout`)
      }
    },

    /**
     * Drops a partition in two transactions. The detach takes a short exclusive lock on the
     * parent (within lock_timeout or not at all) and changes only the catalogue. The drop then
     * frees the day's files, seconds for gigabytes at its commit, locking only the detached
     * table: ingest, which a DROP of the partition itself would hold up until then, goes on.
     */
    async dropPartition(name: string): Promise<void> {
      await detachPartition(name)
      await dropDetached(name)
    },

    dropDetached,

    /**
     * Takes a day past the KPI horizon out of the partitioned table and renames it (one
     * transaction, within lock_timeout or not at all: the detach's brief lock on the parent). Its
     * KPI indexes go next, apart (dropArchiveKpiIndexes): freeing their files takes a while, and
     * the parent's lock would be held until then.
     */
    async archivePartition(name: string, dayMs: number): Promise<void> {
      const archive = archiveName(dayMs)
      await sql.unsafe(`
        set local lock_timeout = '${lockTimeout}';
        alter table ${PARENT} detach partition ${ident(name)};
        alter table ${ident(name)} rename to ${ident(archive)};
        alter index if exists ${ident(sessionIndex(name))} rename to ${ident(sessionIndex(archive))};`)
    },

    archives,

    /** Drops an archive table's indexes but its session index: no KPI window reads the day. */
    async dropArchiveKpiIndexes(archive: string): Promise<void> {
      const indexes = await sql<{ name: string }[]>`
        select ic.relname as name from pg_index x join pg_class ic on ic.oid = x.indexrelid
        where x.indrelid = ${ident(archive)}::regclass and ic.relname <> ${sessionIndex(archive)}`
      for (const { name } of indexes) await sql`drop index if exists ${sql(name)}`
    },

    /** Day tables left detached by a drop cut short between its two steps (the process stopped). */
    async detachedDays(): Promise<string[]> {
      const rows = await sql<{ name: string }[]>`
        select relname as name from pg_class
        where relnamespace = current_schema()::regnamespace and relkind = 'r' and not relispartition
          and relname ~ ${`^${PARENT}_[0-9]{8}$`}`
      return rows.map((r) => r.name)
    },

    /**
     * Deletes the DEFAULT partition's events before `cutoffMs`, in batches. It holds only events
     * outside the daily partitions (clocks far off), so these are few; the bulk of the events goes
     * with its partition.
     */
    async deleteDefaultBefore(cutoffMs: number, batch = 10_000): Promise<number> {
      let total = 0
      for (;;) {
        const rows = await sql.unsafe(
          `delete from ${DEFAULT_PARTITION} where ctid = any (array(
             select ctid from ${DEFAULT_PARTITION} where emitted_at_ms < $1 limit ${batch}))`,
          [cutoffMs],
        )
        total += rows.count
        if (rows.count < batch) return total
      }
    },

    /**
     * Deletes the rollup rows and KPI buckets that no window can reach: every window ends now and
     * starts after `horizonMs` (now minus the longest window), and reads a query's row only if its
     * last event is after the window's start, and a bucket only if its hour or minute starts inside it.
     * Batched, so that no statement holds many row locks that ingest might wait for.
     */
    async deleteUnreachableRollups(horizonMs: number, batch = 10_000): Promise<{ queries: number; buckets: number }> {
      let queries = 0
      for (;;) {
        const rows = await sql`
          delete from docs_search_queries where query_id = any (array(
            select query_id from docs_search_queries where first_ms <= ${horizonMs} and last_ms <= ${horizonMs} limit ${batch}))`
        queries += rows.count
        if (rows.count < batch) break
      }
      const hours = await sql`delete from docs_search_kpi_buckets where hour_ms <= ${horizonMs}`
      const minutes = await sql`delete from docs_search_kpi_minutes where minute_ms <= ${horizonMs}`
      return { queries, buckets: hours.count + minutes.count }
    },

    /**
     * The earliest emitted_at_ms kept, or null when there is none. An archive table has no time
     * index: the oldest archived day counts from its start (days are kept or dropped whole).
     */
    async oldestEventMs(): Promise<number | null> {
      const [row] = await sql<{ oldest: string | null }[]>`select min(emitted_at_ms) as oldest from docs_search_events`
      const [archive] = await archives()
      const kept = [row!.oldest === null ? null : Number(row!.oldest), archive?.dayMs ?? null].filter(
        (ms): ms is number => ms !== null,
      )
      return kept.length === 0 ? null : Math.min(...kept)
    },
  }
}

export type TelemetryLifecycleRepository = ReturnType<typeof createTelemetryLifecycleRepository>

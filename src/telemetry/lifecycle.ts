// The docs-search events' lifecycle, run inside the service: daily partitions created ahead of
// time, days past the KPI horizon archived without their KPI indexes, retention by dropping
// whole days, rollup rows no KPI window can reach deleted.
// One replica at a time (a session advisory lock on a reserved connection; the others skip).
import type { FastifyBaseLogger } from 'fastify'
import type { ReservedSql } from '../db/client.js'
import type { Database } from '../db/database.js'
import { deleteAnalyticsRollupBefore } from '../repositories/telemetry-analytics-rollup.js'
import { runAsTheOnlyReplica } from './replica-lock.js'
import {
  createTelemetryLifecycleRepository,
  DAY_MS,
  isLockTimeout,
  type Partition,
  partitionName,
  type TelemetryLifecycleRepository,
} from '../repositories/telemetry-lifecycle.js'
import { LONGEST_KPI_WINDOW_DAYS } from '../config.js'

const LOCK_ID = 7_346_110_233 // arbitrary constant shared by every replica

export interface LifecycleOptions {
  retentionDays: number
  /** Days after today (UTC) that have their partition before any event arrives (the run is hourly). */
  aheadDays?: number
  now: () => Date
  log: FastifyBaseLogger
  /** How long partition DDL waits for its lock before it gives way to ingest and retries. */
  lockTimeoutMs?: number
  /** Attempts of one DDL statement that keeps meeting lock_timeout; then the next run tries again. */
  attempts?: number
}

export interface LifecycleFigures {
  /** events dropped with their partitions (and the few deleted from the DEFAULT partition) */
  rowsDropped: number
  partitionsDropped: number
  /** days taken out of the table past the KPI horizon (their KPI indexes dropped) */
  partitionsArchived: number
  /** query rollup rows and KPI buckets deleted as unreachable */
  rollupRowsDropped: number
  /** epoch ms of the last completed run, or null */
  lastRunMs: number | null
  /** the earliest emitted_at_ms kept after the last run, or null when there are none */
  oldestEventMs: number | null
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export class TelemetryLifecycle {
  readonly figures: LifecycleFigures = {
    rowsDropped: 0,
    partitionsDropped: 0,
    partitionsArchived: 0,
    rollupRowsDropped: 0,
    lastRunMs: null,
    oldestEventMs: null,
  }
  #running: Promise<boolean> | null = null

  constructor(
    private readonly db: Database,
    private readonly options: LifecycleOptions,
  ) {}

  /** One run; false when another replica holds the lock (or a run of this one is under way). */
  run(): Promise<boolean> {
    this.#running ??= this.#run().finally(() => (this.#running = null))
    return this.#running
  }

  /** Waits for a run under way (on close). */
  async settled(): Promise<void> {
    await this.#running?.catch(() => {})
  }

  #run(): Promise<boolean> {
    return runAsTheOnlyReplica(this.db, LOCK_ID, (connection) =>
      this.#maintain(createTelemetryLifecycleRepository(connection, this.options.lockTimeoutMs ?? 200), connection),
    )
  }

  async #maintain(repo: TelemetryLifecycleRepository, connection: ReservedSql): Promise<void> {
    const { retentionDays, aheadDays = 2, log } = this.options
    const now = this.options.now().getTime()
    const cutoff = now - retentionDays * DAY_MS
    const partitions = await repo.partitions()
    const ranged = partitions.filter((p) => !p.isDefault)

    // Yesterday (late batches), today and `aheadDays` after it. Older days get no new partition:
    // an event that late goes to the DEFAULT partition (a partition costs ~0.1 s to create, and
    // a new database would otherwise start with one per kept day).
    const today = Math.floor(now / DAY_MS) * DAY_MS
    for (
      let day = Math.max(today - DAY_MS, Math.floor(cutoff / DAY_MS) * DAY_MS);
      day <= today + aheadDays * DAY_MS;
      day += DAY_MS
    ) {
      if (ranged.some((p) => overlaps(p, day, day + DAY_MS))) continue
      const name = partitionName(day)
      await this.#withRetry(`create partition ${name}`, () => repo.createPartition(name, day, day + DAY_MS))
    }

    // The table of the previous release, attached as a partition, gets its session index here
    // (CONCURRENTLY: ingest goes on), not in the migration.
    for (const p of ranged.filter((p) => !p.hasSessionIndex)) {
      await repo
        .addSessionIndex(p.name)
        .catch((err) => log.warn({ err, partition: p.name }, 'telemetry: session index not built'))
    }

    // Days that have ended are vacuumed once (and again if late events came): their visibility
    // maps let the KPIs' probes and retention's count read indexes alone.
    const unvacuumed = await repo.unvacuumed()
    for (const p of ranged.filter((p) => p.toMs !== null && p.toMs <= today && unvacuumed.has(p.name)))
      await repo.vacuumDay(p.name).catch((err) => log.warn({ err, partition: p.name }, 'telemetry: day not vacuumed'))

    // Days past the KPI horizon (no window reads them) leave the table, then lose their KPI
    // indexes, about half a day's bytes: what is left (the events and their session index, for
    // erasure) waits for retention, whose drop then frees half as much.
    const horizon = now - LONGEST_KPI_WINDOW_DAYS * DAY_MS
    const archived = new Set((await repo.archives()).map((a) => a.dayMs))
    for (const p of ranged.filter((p) => isDay(p) && p.toMs! <= horizon)) {
      // A day archived already (its partition made again after the clock went back a week):
      // this one stays a partition until retention drops it.
      if (archived.has(p.fromMs!)) continue
      if (await this.#withRetry(`archive partition ${p.name}`, () => repo.archivePartition(p.name, p.fromMs!)))
        this.figures.partitionsArchived++
    }
    const archives = await repo.archives()
    for (const archive of archives) {
      if (archive.kpiIndexes > 0) await repo.dropArchiveKpiIndexes(archive.name)
      // A day archived without its session index (its build had failed) gets one: erasure and the count read it.
      if (!archive.hasSessionIndex)
        await repo
          .addSessionIndex(archive.name)
          .catch((err) => log.warn({ err, archive: archive.name }, 'telemetry: session index not built'))
    }

    // A drop cut short between its detach and its drop (the process stopped) is finished first;
    // then retention: whole days whose every event is older than the limit.
    const dropTable = (name: string) => async () => {
      await repo.dropDetached(name)
      return true
    }
    for (const name of await repo.detachedDays()) await this.#dropDay(repo, name, dropTable(name))
    for (const archive of archives)
      if (archive.dayMs + DAY_MS <= cutoff) await this.#dropDay(repo, archive.name, dropTable(archive.name))
    for (const p of (await repo.partitions()).filter((p) => !p.isDefault && p.toMs !== null && p.toMs <= cutoff))
      await this.#dropDay(repo, p.name, () =>
        this.#withRetry(`drop partition ${p.name}`, () => repo.dropPartition(p.name)),
      )
    // The same rule for the DEFAULT partition's events: kept until their whole day is past the limit.
    this.figures.rowsDropped += await repo.deleteDefaultBefore(Math.floor(cutoff / DAY_MS) * DAY_MS)

    const { queries, buckets } = await repo.deleteUnreachableRollups(horizon)
    this.figures.rollupRowsDropped += queries + buckets
    this.figures.oldestEventMs = await repo.oldestEventMs()
    // The analytics rollup's rows of the days retention dropped: before its cutoff's day and
    // before the oldest event kept (a day whose drop gave way to ingest keeps its rows).
    const dropped = Math.floor(cutoff / DAY_MS) * DAY_MS
    this.figures.rollupRowsDropped += await deleteAnalyticsRollupBefore(
      connection,
      Math.min(dropped, this.figures.oldestEventMs ?? dropped),
    )
    this.figures.lastRunMs = Date.now()
  }

  /** Drops one day's table with `drop` (false: it gave way to ingest) and counts its rows as dropped. */
  async #dropDay(repo: TelemetryLifecycleRepository, name: string, drop: () => Promise<boolean>): Promise<void> {
    const rows = await repo.countRows(name)
    const started = performance.now()
    if (!(await drop())) return
    this.figures.rowsDropped += rows
    this.figures.partitionsDropped++
    this.options.log.info(
      { partition: name, rows, ms: Math.round(performance.now() - started) },
      'telemetry: partition dropped by retention',
    )
  }

  /** Retries a statement that gave way to ingest (lock_timeout); false if it never got its lock. */
  async #withRetry(what: string, action: () => Promise<void>): Promise<boolean> {
    const attempts = this.options.attempts ?? 50
    for (let attempt = 1; ; attempt++) {
      try {
        await action()
        return true
      } catch (err) {
        if (!isLockTimeout(err)) throw err
        if (attempt >= attempts) {
          this.options.log.warn(
            { attempts },
            `telemetry: ${what} gave way to ingest every time; the next run tries again`,
          )
          return false
        }
        await sleep(20 + Math.random() * 80)
      }
    }
  }
}

/** A daily partition (not the DEFAULT one, nor the previous release's table attached for all times before a day). */
function isDay(p: Partition): boolean {
  return p.fromMs !== null && p.toMs === p.fromMs + DAY_MS && p.name === partitionName(p.fromMs)
}

function overlaps(p: Partition, fromMs: number, toMs: number): boolean {
  return (p.fromMs === null || p.fromMs < toMs) && (p.toMs === null || p.toMs > fromMs)
}

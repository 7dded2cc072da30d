// The docs-search analytics rollup's refresh, run inside the service every minute (and at once
// after an erasure): the 5-minute slices touched since the last refresh are recomputed from the raw events
// (src/repositories/telemetry-analytics-rollup.ts). One replica at a time (a session advisory
// lock on a reserved connection; the others skip, as the lifecycle's do).
import type { Database } from '../db/database.js'
import { loggedSlices, SLICES_PER_REFRESH, refreshAnalyticsRollup } from '../repositories/telemetry-analytics-rollup.js'
import { runAsTheOnlyReplica } from './replica-lock.js'

/** The session advisory lock of the refresh: an arbitrary constant shared by every replica. */
export const REFRESH_LOCK_ID = 7_346_110_234

export interface AnalyticsRollupFigures {
  /** epoch ms when the last refresh that emptied the log started (its data is at least that fresh), or null */
  lastRefreshStartMs: number | null
  /** how long it took */
  lastRefreshMs: number | null
  /** slices left logged when the last refresh ended on its budget (0 when it emptied the log) */
  backlogSlices: number
  /** slices recomputed whole by this process */
  slicesRecomputed: number
  /** slices where this process recomputed the share of query ids linked to other slices */
  slicesLinked: number
}

export class AnalyticsRollup {
  readonly figures: AnalyticsRollupFigures = {
    lastRefreshStartMs: null,
    lastRefreshMs: null,
    backlogSlices: 0,
    slicesRecomputed: 0,
    slicesLinked: 0,
  }
  #running: Promise<boolean> | null = null
  #queued: Promise<boolean> | null = null

  /**
   * `budgetMs`: a refresh takes further batches of slices only while it has run for less than
   * this (default: until the log is empty). During a burst of ingest far above the site's own
   * pace the refresh would otherwise compete with ingest for the whole burst; bounded, the newest
   * slices (and any erasure) are refreshed first and the rest waits for the next refresh.
   */
  constructor(
    private readonly db: Database,
    private readonly budgetMs = Number.POSITIVE_INFINITY,
  ) {}

  /**
   * A refresh that starts after this call (one under way is waited for first, then one more
   * runs; callers meanwhile share it). False when another replica holds the lock.
   */
  refresh(): Promise<boolean> {
    this.#queued ??= (this.#running ?? Promise.resolve(true))
      .catch(() => true)
      .then(() => {
        this.#queued = null
        this.#running = this.#refresh().finally(() => (this.#running = null))
        return this.#running
      })
    return this.#queued
  }

  /** Waits for the refreshes asked for (on close). */
  async settled(): Promise<void> {
    await this.#queued?.catch(() => {})
    await this.#running?.catch(() => {})
  }

  #refresh(): Promise<boolean> {
    return runAsTheOnlyReplica(this.db, REFRESH_LOCK_ID, async (connection) => {
      const startMs = Date.now()
      const started = performance.now()
      // Until the log holds fewer slices than one batch takes (after an upgrade: every slice), or
      // the budget is spent.
      for (;;) {
        const { logged, recomputed, linked } = await refreshAnalyticsRollup(connection)
        this.figures.slicesRecomputed += recomputed
        this.figures.slicesLinked += linked
        if (logged < SLICES_PER_REFRESH) {
          this.figures.backlogSlices = 0
          this.figures.lastRefreshStartMs = startMs
          break
        }
        if (performance.now() - started >= this.budgetMs) {
          this.figures.backlogSlices = await loggedSlices(connection)
          break
        }
      }
      this.figures.lastRefreshMs = performance.now() - started
    })
  }
}

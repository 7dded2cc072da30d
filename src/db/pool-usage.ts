// What the process asks of its PostgreSQL pool, counted where it asks: postgres.js exposes no
// pool statistics, so these are the service's own counts (read by /metrics at scrape time).
import { DEADLINE_REASONS, type DeadlineReason } from './deadline.js'

export class PoolUsage {
  /** Statements made and not yet answered (several may share one connection), counted from postgres.js's diagnostics channel. */
  inFlight = 0
  /** Connections held by a transaction or an export. */
  reserved = 0
  /** Transactions and exports waiting for a free connection. */
  waiting = 0
  /** Connections held by exports (a part of `reserved`). */
  exports = 0
  /** Requests whose database work was cut (answered 503), by reason. */
  readonly deadlinesExceeded = Object.fromEntries(DEADLINE_REASONS.map((r) => [r, 0])) as Record<DeadlineReason, number>
  readonly countDeadline = (reason: DeadlineReason): void => {
    this.deadlinesExceeded[reason]++
  }
}

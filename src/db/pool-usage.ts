// What the process asks of its PostgreSQL pool, counted where it asks: postgres.js exposes no
// pool statistics, so these are the service's own counts (read by /metrics at scrape time).
export class PoolUsage {
  /** Repository operations sent and not yet answered (several may share one connection). */
  inFlight = 0
  /** Connections held by a transaction. */
  reserved = 0
  /** Transactions waiting for a free connection. */
  waiting = 0
}

// What the process asks of its PostgreSQL pool, counted where it asks: postgres.js exposes no
// pool statistics, so these are the service's own counts (read by /metrics at scrape time).
export class PoolUsage {
  /** Statements made and not yet answered (several may share one connection), counted from postgres.js's diagnostics channel. */
  inFlight = 0
  /** Connections held by a transaction. */
  reserved = 0
  /** Transactions waiting for a free connection. */
  waiting = 0
}

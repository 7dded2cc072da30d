// What the service's code gets of PostgreSQL: the pool, its repositories and its transactions.
// The database plugin (src/plugins/app/database.ts) makes one and exposes it as `fastify.db`;
// the telemetry jobs and the handlers take it by this type, so no module below the plugins
// imports a plugin.
import type { ExportPool } from '../repositories/learner-export.js'
import type { Repositories } from '../repositories/index.js'
import type { Sql, TransactionSql } from './client.js'
import type { PoolUsage } from './pool-usage.js'

export interface Database {
  sql: Sql
  /** The pool's configured size and what the process currently asks of it (for /metrics). */
  maxConnections: number
  usage: PoolUsage
  /** Repositories over the pool, for single-statement work. */
  repos: Repositories
  /** The pool as learner exports take it: at most their share of its connections. */
  exportPool: ExportPool
  /**
   * Runs `work` in one transaction on a connection of its own (src/db/transaction.ts) and
   * resolves to its result once committed; its error rolls the transaction back and is rethrown.
   */
  transaction<R>(work: (tx: Transaction) => Promise<R>): Promise<R>
  /** One trivial statement on the pool (the readiness probe's check), not bounded by a request's deadline. */
  ping(): Promise<void>
}

/** A transaction's statements: raw, and through the repositories (bounded as a whole by the transaction). */
export interface Transaction {
  sql: TransactionSql
  repos: Repositories
}

// What the service's code gets of PostgreSQL: the pool, its repositories and its transactions.
// The database plugin (src/plugins/app/database.ts) makes one and exposes it as `fastify.db`;
// the telemetry jobs and the handlers take it by this type, so no module below the plugins
// imports a plugin.
import type { PendingQuery, Row } from 'postgres'
import type { ExportPool } from '../repositories/learner-export.js'
import type { Repositories } from '../repositories/index.js'
import type { ReservedSql, Sql } from './client.js'
import type { PoolUsage } from './pool-usage.js'

/** The statement a transaction ends with, built but not sent: `transaction` sends it with COMMIT. */
export type ClosingStatement = PendingQuery<Row[]>

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
   * Runs `work`, then the statement `close` builds from its result, in one transaction on a
   * connection of its own, and resolves to work's result once committed. Work's or the closing
   * statement's error rolls the transaction back and is rethrown.
   */
  transaction<R>(
    work: (tx: Transaction) => Promise<R>,
    close?: (tx: Transaction, result: R) => ClosingStatement,
  ): Promise<R>
}

/** A transaction's statements: raw, and through the repositories. */
export interface Transaction {
  sql: ReservedSql
  repos: Repositories
}

import fp from 'fastify-plugin'
import type { Sql, TransactionSql } from '../../db/client.js'
import { PoolUsage } from '../../db/pool-usage.js'
import { createRepositories, type Repositories } from '../../repositories/index.js'

export interface Database {
  sql: Sql
  /** The pool's configured size and what the process currently asks of it (for /metrics). */
  maxConnections: number
  usage: PoolUsage
  /** Repositories over the pool, for single-statement work. */
  repos: Repositories
  /** Runs `work` in one transaction (postgres.js `sql.begin`): committed when it resolves, rolled back when it throws. */
  begin<R>(work: (tx: Transaction) => Promise<R>): Promise<R>
}

/** A transaction's statements: raw, and through the repositories. */
export interface Transaction {
  sql: TransactionSql
  repos: Repositories
}

declare module 'fastify' {
  interface FastifyInstance {
    db: Database
  }
}

/** Exposes PostgreSQL as `fastify.db`. The pool belongs to the caller, which closes it. */
export default fp<{ sql: Sql }>(
  async (fastify, { sql }) => {
    const observe = fastify.observeDbOperation
    const usage = new PoolUsage()
    const db: Database = {
      sql,
      maxConnections: sql.options.max,
      usage,
      repos: createRepositories(sql, observe, usage),
      async begin<R>(work: (tx: Transaction) => Promise<R>): Promise<R> {
        usage.waiting++
        let holding = false
        try {
          return (await sql.begin((tx) => {
            usage.waiting--
            usage.reserved++
            holding = true
            return work({ sql: tx, repos: createRepositories(tx, observe, usage) })
          })) as R
        } finally {
          if (holding) usage.reserved--
          else usage.waiting--
        }
      },
    }
    fastify.decorate('db', db)
  },
  { name: 'database', dependencies: ['metrics'] },
)

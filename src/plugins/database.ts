import fp from 'fastify-plugin'
import type { Sql } from '../db/client.js'
import { PoolUsage } from '../db/pool-usage.js'
import { createRepositories, type Repositories } from '../repositories/index.js'

export interface Database {
  sql: Sql
  /** The pool's configured size and what the process currently asks of it (for /metrics). */
  maxConnections: number
  usage: PoolUsage
  /** Repositories over the pool, for single-statement work. */
  repos: Repositories
  /** A pooled connection of its own (for a hand-driven transaction); release it when done. */
  reserve(): Promise<ReservedConnection>
}

export interface ReservedConnection {
  sql: Sql
  /** Repositories bound to this one connection. */
  repos: Repositories
  release(): void
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
      async reserve() {
        usage.waiting++
        let connection: Awaited<ReturnType<Sql['reserve']>>
        try {
          connection = await sql.reserve()
        } finally {
          usage.waiting--
        }
        usage.reserved++
        let released = false
        const release = () => {
          if (released) return
          released = true
          usage.reserved--
          connection.release()
        }
        return { sql: connection, repos: createRepositories(connection, observe, usage), release }
      },
    }
    fastify.decorate('db', db)
  },
  { name: 'database', dependencies: ['metrics'] },
)

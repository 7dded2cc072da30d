import fp from 'fastify-plugin'
import type { Sql } from '../db/client.js'
import { createRepositories, type Repositories } from '../repositories/index.js'

export interface Database {
  sql: Sql
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
    const db: Database = {
      sql,
      repos: createRepositories(sql, observe),
      async reserve() {
        const connection = await sql.reserve()
        return { sql: connection, repos: createRepositories(connection, observe), release: () => connection.release() }
      },
    }
    fastify.decorate('db', db)
  },
  { name: 'database', dependencies: ['metrics'] },
)

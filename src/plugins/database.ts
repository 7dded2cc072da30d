import fp from 'fastify-plugin'
import type { Sql } from '../db/client.js'
import { createRepositories, type Repositories } from '../repositories/index.js'

export interface Database {
  sql: Sql
  /** Repositories over the pool, for single-statement work. */
  repos: Repositories
  /** Runs `work` in one transaction with repositories bound to it. */
  transaction<T>(work: (repos: Repositories) => Promise<T>): Promise<T>
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
      transaction: (work) => sql.begin((tx) => work(createRepositories(tx, observe))) as never,
    }
    fastify.decorate('db', db)
  },
  { name: 'database', dependencies: ['metrics'] },
)

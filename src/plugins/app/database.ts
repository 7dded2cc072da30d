import fp from 'fastify-plugin'
import type { PendingQuery, Row } from 'postgres'
import type { ReservedSql, Sql } from '../../db/client.js'
import { PoolUsage } from '../../db/pool-usage.js'
import { watchStatements } from '../../db/statement-channel.js'
import { describeStatement } from '../../db/statement-names.js'
import { createRepositories, type Repositories } from '../../repositories/index.js'

/** The statement a transaction ends with, built but not sent: `transaction` sends it with COMMIT. */
export type ClosingStatement = PendingQuery<Row[]>

export interface Database {
  sql: Sql
  /** The pool's configured size and what the process currently asks of it (for /metrics). */
  maxConnections: number
  usage: PoolUsage
  /** Repositories over the pool, for single-statement work. */
  repos: Repositories
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
    // Every statement's time and count in flight, from postgres.js's diagnostics channel: no
    // wrapper around the client or the repositories. The channel is the process's, so a process
    // that runs two apps (tests) counts both apps' statements in each.
    // (Only statements seen starting are counted out: one in flight when this subscribes is not.)
    const started = new WeakSet<object>()
    const stopWatching = watchStatements({
      start(statement) {
        started.add(statement)
        usage.inFlight++
      },
      asyncEnd(statement) {
        if (!started.delete(statement)) return
        usage.inFlight--
        observe(describeStatement(statement.query ?? '').name, ((statement.complete ?? 0) - statement.queued) / 1000)
      },
    })
    fastify.addHook('onClose', async () => stopWatching())

    // Pipelined (postgres.js sends statements queued on one connection without waiting for the
    // answers): BEGIN travels with work's first statement, and the closing statement with COMMIT,
    // so the transaction adds no round trip to its statements'. Order is what makes it one
    // transaction: a connection runs its statements in the order they were executed, so the
    // closing statement is executed first and COMMIT right behind it, in one synchronous step.
    // If the closing statement fails, PostgreSQL answers that COMMIT with a rollback.
    async function transaction<R>(
      work: (tx: Transaction) => Promise<R>,
      close?: (tx: Transaction, result: R) => ClosingStatement,
    ): Promise<R> {
      usage.waiting++
      let reserved: ReservedSql
      try {
        reserved = await sql.reserve()
      } finally {
        usage.waiting--
      }
      usage.reserved++
      const tx: Transaction = { sql: reserved, repos: createRepositories(reserved) }
      try {
        const begun = reserved`begin`.execute()
        let result: R
        let closing: ClosingStatement | undefined
        try {
          result = await work(tx)
          await begun
          closing = close?.(tx, result)
        } catch (err) {
          await begun.catch(() => {})
          await reserved`rollback`.catch(() => {})
          throw err
        }
        const [closed, committed] = await Promise.allSettled([closing?.execute(), reserved`commit`.execute()])
        if (closed.status === 'rejected') throw closed.reason
        if (committed.status === 'rejected') throw committed.reason
        return result
      } finally {
        reserved.release()
        usage.reserved--
      }
    }

    const db: Database = {
      sql,
      maxConnections: sql.options.max,
      usage,
      repos: createRepositories(sql),
      transaction,
    }
    fastify.decorate('db', db)
  },
  { name: 'database', dependencies: ['metrics'] },
)

import fp from 'fastify-plugin'
import type { Sql } from '../../db/client.js'
import { bounded, isDeadlineExceeded } from '../../db/deadline.js'
import { PoolUsage } from '../../db/pool-usage.js'
import { ConnectionShare } from '../../db/connection-share.js'
import { reserveConnection } from '../../db/reserve.js'
import { watchStatements } from '../../db/statement-channel.js'
import { describeStatement } from '../../db/statement-names.js'
import { createRepositories } from '../../repositories/index.js'
import type { ClosingStatement, Database, Transaction } from '../../db/database.js'

declare module 'fastify' {
  interface FastifyInstance {
    db: Database
  }
}

/** Exposes PostgreSQL as `fastify.db`. The pool belongs to the caller, which closes it. */
export default fp<{ sql: Sql; exportMaxConnections: number }>(
  async (fastify, { sql, exportMaxConnections }) => {
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
      const reserved = await reserveConnection(sql, usage)
      const tx: Transaction = { sql: reserved, repos: createRepositories(reserved, usage.countDeadline) }
      // Past the request's deadline the request answers at once; the connection is given back
      // only once what was sent on it has settled and it has rolled back (never committed), so
      // the pool never hands out a connection with a statement still running on it.
      let pending: Promise<unknown> = Promise.resolve()
      const giveBackLater = () =>
        void pending
          .catch(() => {})
          .then(() => reserved`rollback`)
          .catch(() => {})
          .finally(() => {
            reserved.release()
            usage.reserved--
          })
      let givenBack = false
      try {
        const begun = reserved`begin`.execute()
        let result: R
        let closing: ClosingStatement | undefined
        try {
          const working = work(tx)
          pending = Promise.allSettled([begun, working])
          result = await working
          await bounded(begun, usage.countDeadline)
          closing = close?.(tx, result)
        } catch (err) {
          if (isDeadlineExceeded(err)) {
            givenBack = true
            giveBackLater()
            throw err
          }
          await begun.catch(() => {})
          await reserved`rollback`.catch(() => {})
          throw err
        }
        const ending = Promise.allSettled([closing?.execute(), reserved`commit`.execute()])
        pending = ending
        let closed: PromiseSettledResult<unknown>, committed: PromiseSettledResult<unknown>
        try {
          ;[closed, committed] = await bounded(ending, usage.countDeadline)
        } catch (err) {
          // COMMIT is on its way and may still land: the answer is 503 either way, and a client
          // retrying with its Idempotency-Key gets the stored answer if it did.
          givenBack = true
          giveBackLater()
          throw err
        }
        if (closed.status === 'rejected') throw closed.reason
        if (committed.status === 'rejected') throw committed.reason
        return result
      } finally {
        if (!givenBack) {
          reserved.release()
          usage.reserved--
        }
      }
    }

    const db: Database = {
      sql,
      maxConnections: sql.options.max,
      usage,
      repos: createRepositories(sql, usage.countDeadline),
      exportPool: { sql, usage, share: new ConnectionShare(exportMaxConnections, usage.countDeadline) },
      transaction,
    }
    fastify.decorate('db', db)
  },
  { name: 'database', dependencies: ['metrics'] },
)

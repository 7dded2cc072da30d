import fp from 'fastify-plugin'
import type { Sql } from '../../db/client.js'
import { PoolUsage } from '../../db/pool-usage.js'
import { ConnectionShare } from '../../db/connection-share.js'
import { watchStatements } from '../../db/statement-channel.js'
import { describeStatement } from '../../db/statement-names.js'
import { registerPoolGauges } from '../../metrics/pool-gauges.js'
import { createRepositories } from '../../repositories/index.js'
import { createTransact } from '../../db/transaction.js'
import type { Database, Transaction } from '../../db/database.js'

declare module 'fastify' {
  interface FastifyInstance {
    db: Database
  }
}

/** Exposes PostgreSQL as `fastify.db`, and its pool gauges. The pool belongs to the caller, which closes it. */
export default fp<{ sql: Sql; exportMaxConnections: number }>(
  async (fastify, { sql, exportMaxConnections }) => {
    const observe = fastify.serviceMetrics.observeDbOperation
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

    // A transaction on a connection of its own, within the request's deadline; its repositories
    // are not bounded one by one: the transaction is, as a whole.
    const transact = createTransact(sql, usage)
    const transaction = <R>(work: (tx: Transaction) => Promise<R>): Promise<R> =>
      transact((tx) => work({ sql: tx, repos: createRepositories(tx) }))

    const db: Database = {
      sql,
      maxConnections: sql.options.max,
      usage,
      repos: createRepositories(sql, usage.countDeadline),
      exportPool: { sql, usage, share: new ConnectionShare(exportMaxConnections, usage.countDeadline) },
      transaction,
      ping: async () => {
        await sql`select 1`
      },
    }
    fastify.decorate('db', db)
    registerPoolGauges(fastify.metrics.client, db)
  },
  { name: 'database', dependencies: ['metrics'] },
)

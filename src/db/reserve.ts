// A connection of the pool for one caller (a transaction, an export), counted in PoolUsage.
// postgres.js queues reserve() without a time limit unless told one: within a request the wait
// is bounded by DATABASE_CONNECTION_WAIT_MS here, whichever major of the driver runs.
import type { ReservedSql, Sql } from './client.js'
import { connectionWaitMs, isDeadlineExceeded, within } from './deadline.js'
import type { PoolUsage } from './pool-usage.js'

/** Reserves a connection (counted in usage.reserved until the caller releases it and decrements). */
export async function reserveConnection(sql: Sql, usage: PoolUsage): Promise<ReservedSql> {
  usage.waiting++
  let reserved: ReservedSql
  try {
    // postgres.js 4 can withdraw a waiting reserve (its promise's cancel()); 3 cannot, and a
    // connection it hands over late is released at once.
    const reserving = sql.reserve() as Promise<ReservedSql> & { cancel?: () => unknown }
    reserved = await within(reserving, connectionWaitMs(), 'connection_wait', usage.countDeadline, (late) =>
      late.release(),
    ).catch((err: unknown) => {
      if (isDeadlineExceeded(err)) void Promise.resolve(reserving.cancel?.()).catch(() => {})
      throw err
    })
  } finally {
    usage.waiting--
  }
  usage.reserved++
  return reserved
}

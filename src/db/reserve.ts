// A connection of the pool for one caller (a transaction, an export), counted in PoolUsage.
// postgres.js queues reserve() without a time limit, and a queued reserve cannot be withdrawn:
// within a request the wait is bounded by DATABASE_CONNECTION_WAIT_MS, and a connection that
// arrives after the caller gave up is given straight back.
import type { ReservedSql, Sql } from './client.js'
import { connectionWaitMs, within } from './deadline.js'
import type { PoolUsage } from './pool-usage.js'

/** Reserves a connection (counted in usage.reserved until the caller releases it and decrements). */
export async function reserveConnection(sql: Sql, usage: PoolUsage): Promise<ReservedSql> {
  usage.waiting++
  let reserved: ReservedSql
  try {
    reserved = await within(sql.reserve(), connectionWaitMs(), 'connection_wait', usage.countDeadline, (late) =>
      late.release(),
    )
  } finally {
    usage.waiting--
  }
  usage.reserved++
  return reserved
}

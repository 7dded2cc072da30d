import type { ReservedSql } from '../db/client.js'
import type { Database } from '../db/database.js'

/**
 * Runs `work` on one reserved connection while it holds the session advisory lock `lockId`, so
 * that one replica at a time does it; false, without running it, when another holds the lock.
 */
export async function runAsTheOnlyReplica(
  db: Database,
  lockId: number,
  work: (connection: ReservedSql) => Promise<void>,
): Promise<boolean> {
  // A session lock needs one connection for the whole run: postgres.js' own reserve().
  const connection = await db.sql.reserve()
  try {
    const [row] = await connection<{ locked: boolean }[]>`select pg_try_advisory_lock(${lockId}) as locked`
    if (!row!.locked) return false
    try {
      await work(connection)
    } finally {
      await connection`select pg_advisory_unlock(${lockId})`
    }
    return true
  } finally {
    connection.release()
  }
}

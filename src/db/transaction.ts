// A transaction that costs two round trips beyond its work: BEGIN is sent together with the
// work's first statement, and the closing statement together with COMMIT.
//
// The closing statement must reach the connection BEFORE the COMMIT: a COMMIT queued first
// would commit the work without it (for idempotency: the business write without its stored
// answer, so a concurrent duplicate would not wait on the answer's key and would run twice).
// That order is held here and only here: `last` returns a statement that is not sent yet
// (a postgres.js PendingQuery, lazy until executed), and this function executes it and then
// COMMIT in the same synchronous step. postgres.js hands executed statements to the
// connection in the order they were executed. If the closing statement fails, PostgreSQL
// answers the COMMIT of the aborted transaction with a rollback, and its error is thrown.
import type { PendingQuery, Row } from 'postgres'
import type { Sql } from './client.js'
import type { Repositories } from '../repositories/index.js'

/** What a pipelined transaction needs of the database: a connection of its own. */
export interface ReservingDatabase {
  reserve(): Promise<{ sql: Sql; repos: Repositories; release(): void }>
}

/** A statement not sent yet; inPipelinedTransaction sends it right before COMMIT. */
export type ClosingStatement = PendingQuery<Row[]>

/**
 * Runs `work` and then `last(result)` in one transaction on one reserved connection and
 * returns work's result. Work's errors roll back and are rethrown; so are the closing
 * statement's (the transaction is then rolled back by PostgreSQL).
 */
export async function inPipelinedTransaction<T>(
  db: ReservingDatabase,
  work: (repos: Repositories) => Promise<T>,
  last: (sql: Sql, result: T) => ClosingStatement,
): Promise<T> {
  const connection = await db.reserve()
  try {
    const begun = connection.sql`begin`.execute()
    let result: T
    let closing: ClosingStatement
    try {
      result = await work(connection.repos)
      await begun
      closing = last(connection.sql, result)
    } catch (err) {
      await begun.catch(() => {})
      await connection.sql`rollback`
      throw err
    }
    // One synchronous step: the closing statement is queued, then COMMIT behind it.
    const [closed, committed] = await Promise.allSettled([closing.execute(), connection.sql`commit`.execute()])
    if (committed.status === 'rejected') throw committed.reason
    if (closed.status === 'rejected') throw closed.reason
    return result
  } finally {
    connection.release()
  }
}

// A transaction on a connection of its own: postgres.js `sql.begin` (BEGIN, the work, COMMIT; a
// failure rolls back), within the request's deadline (src/db/deadline.ts). Its connection and
// its BEGIN are waited for at most DATABASE_CONNECTION_WAIT_MS (reason `connection_wait`), the
// rest races the request's deadline (`deadline`). Cut at either, the request answers 503 at once
// and the transaction is never committed: a wait for a connection is withdrawn, work in progress
// is rolled back (later statements are not sent), and a BEGIN answered late rolls back at once.
// postgres.js gives the connection back once what was sent on it has settled. A COMMIT already
// on its way may still land: a client retrying with its Idempotency-Key then gets the stored answer.
import type { Sql, TransactionSql } from './client.js'
import { bounded, connectionWaitMs, isDeadlineExceeded, within } from './deadline.js'
import type { PoolUsage } from './pool-usage.js'

export type Transact = <R>(work: (tx: TransactionSql) => Promise<R>) => Promise<R>

/** Transactions on `sql`, counted in `usage` (waiting for a connection, then holding one). */
export function createTransact(sql: Sql, usage: PoolUsage): Transact {
  return async function transact<R>(work: (tx: TransactionSql) => Promise<R>): Promise<R> {
    let waiting = true
    let held = false
    let cut = false
    let working: TransactionSql | undefined
    const stopWaiting = () => {
      if (waiting) usage.waiting--
      waiting = false
    }
    let begun!: () => void
    const begin = new Promise<void>((resolve) => (begun = resolve))
    usage.waiting++
    const running = sql.begin(async (tx) => {
      stopWaiting()
      held = true
      usage.reserved++
      begun()
      if (cut) return tx.rollback() as Promise<never>
      working = tx
      try {
        return await work(tx)
      } finally {
        working = undefined
      }
    })
    const ended = running.finally(() => {
      stopWaiting()
      if (held) usage.reserved--
    }) as Promise<R>
    ended.catch(() => {})
    try {
      await within(Promise.race([begin, ended]), connectionWaitMs(), 'connection_wait', usage.countDeadline)
      return await bounded(ended, usage.countDeadline)
    } catch (err) {
      if (isDeadlineExceeded(err)) {
        cut = true
        stopWaiting()
        void running.cancel()
        working?.rollback().catch(() => {})
      }
      throw err
    }
  }
}

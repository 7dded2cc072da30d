// SQL for stored idempotent answers (table idempotency_records).
import type { Db } from '../db/client.js'

export interface StoredAnswer {
  request_hash: string
  status_code: number
  /** The answer's JSON text, exactly as it was sent. */
  response_body: string
}

export function createIdempotencyRepository(db: Db) {
  return {
    /** A finished, unexpired answer for (scope, key), if any. */
    async find(scope: string, key: string): Promise<StoredAnswer | undefined> {
      const [row] = await db<StoredAnswer[]>`
        select request_hash, status_code, response_body
        from idempotency_records
        where scope = ${scope} and idempotency_key = ${key}
          and expires_at > now() and status_code is not null`
      return row
    },

    /**
     * Stores the answer for (scope, key). Sent at once rather than on first await, so that a
     * statement queued after it on the same connection (the COMMIT) runs after it. Fails with a
     * primary-key violation when the pair is taken; an uncommitted holder is waited for.
     */
    record(scope: string, key: string, hash: string, status: number, body: string, ttlHours: number): Promise<unknown> {
      return db`
        insert into idempotency_records (scope, idempotency_key, request_hash, status_code, response_body, expires_at)
        values (${scope}, ${key}, ${hash}, ${status}, ${body}, now() + make_interval(hours => ${ttlHours}))`.execute()
    },

    /** Removes the pair's record if it has expired (the purge has not reached it yet). */
    async deleteExpired(scope: string, key: string): Promise<void> {
      await db`delete from idempotency_records where scope = ${scope} and idempotency_key = ${key} and expires_at <= now()`
    },

    /** Deletes up to `limit` expired records; returns how many went. */
    async purgeExpired(limit = 1000): Promise<number> {
      const rows = await db`
        delete from idempotency_records
        where ctid in (select ctid from idempotency_records where expires_at <= now() limit ${limit})
        returning 1`
      return rows.length
    },
  }
}

export type IdempotencyRepository = ReturnType<typeof createIdempotencyRepository>

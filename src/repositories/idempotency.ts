// SQL for stored idempotent answers (table idempotency_records).
import type { Db } from '../db/client.js'

export interface StoredAnswer {
  request_hash: string
  status_code: number
  response_body: unknown
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
     * Claims (scope, key) for this transaction. A concurrent claim of the same pair waits on the
     * primary key until this transaction ends; an expired record is taken over.
     */
    async claim(scope: string, key: string, hash: string, ttlHours: number): Promise<boolean> {
      const rows = await db`
        insert into idempotency_records (scope, idempotency_key, request_hash, expires_at)
        values (${scope}, ${key}, ${hash}, now() + make_interval(hours => ${ttlHours}))
        on conflict (scope, idempotency_key) do update
          set request_hash = excluded.request_hash, status_code = null, response_body = null,
              created_at = now(), expires_at = excluded.expires_at
          where idempotency_records.expires_at <= now()
        returning 1`
      return rows.length === 1
    },

    async complete(scope: string, key: string, status: number, body: unknown): Promise<void> {
      await db`
        update idempotency_records
        set status_code = ${status}, response_body = ${db.json(body as never)}
        where scope = ${scope} and idempotency_key = ${key}`
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

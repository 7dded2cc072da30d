// SQL for stored idempotent answers (table idempotency_records), keyed by
// (key_id, scope, idempotency_key): every caller has its own keys.
import type { Db, Sql } from '../db/client.js'
import type { ClosingStatement } from '../db/transaction.js'
import { USER_COLUMN_LIST, type User, type UserKey } from './users.js'

// The learner's columns, qualified for the join in findWithLearner.
const LEARNER_COLUMNS = USER_COLUMN_LIST.split(',').map((c) => `u.${c.trim()}`).join(', ')

export interface StoredAnswer {
  request_hash: string
  status_code: number
  /** The answer's JSON text, exactly as it was sent. */
  response_body: string
}

/**
 * The key_id of records stored before records were scoped by caller (migration 0009). Every
 * caller then held an API_KEYS key, so only API_KEYS keys may still replay them (until they
 * expire); no key id is empty.
 */
export const LEGACY_RECORD_KEY_ID = ''

/** The learner a write was decided from, by its system key: what insertAnswer() checks. */
export interface LearnerCheck {
  system_user_id: string
  system_uuid: string
  client_uuid: string
  timezone: string
}

export interface AnswerRecord {
  keyId: string
  scope: string
  key: string
  hash: string
  status: number
  body: string
  ttlHours: number
  /** For a write on a learner's behalf: the learner it was decided from, checked by the INSERT. */
  learner?: LearnerCheck
}

/**
 * The INSERT that stores an answer, not sent yet: inPipelinedTransaction sends it right before
 * COMMIT. Fails with a primary-key violation when (key id, scope, key) is taken (an uncommitted
 * holder is waited for), and as isLearnerChanged() tells when `learner` is no longer the stored
 * one: the learner with that system key no longer has that client_uuid and time zone.
 */
export function insertAnswer(sql: Sql, r: AnswerRecord): ClosingStatement {
  if (r.learner) {
    const l = r.learner
    // The hash comes through a lookup of the learner: no such learner makes it null, which the
    // column's NOT NULL refuses. The statement must fail, not insert nothing: COMMIT follows it
    // in the same pipeline, and only an error turns that COMMIT into a rollback. A function
    // raising its own error would read better and costs PostgreSQL more (a PL/pgSQL call).
    return sql`
      insert into idempotency_records (key_id, scope, idempotency_key, request_hash, status_code, response_body, expires_at)
      values (${r.keyId}, ${r.scope}, ${r.key},
              (select ${r.hash}::text from users
                where system_user_id = ${l.system_user_id} and system_uuid = ${l.system_uuid}
                  and client_uuid = ${l.client_uuid} and timezone = ${l.timezone}),
              ${r.status}, ${r.body}, now() + make_interval(hours => ${r.ttlHours}))`
  }
  return sql`
    insert into idempotency_records (key_id, scope, idempotency_key, request_hash, status_code, response_body, expires_at)
    values (${r.keyId}, ${r.scope}, ${r.key}, ${r.hash}, ${r.status}, ${r.body}, now() + make_interval(hours => ${r.ttlHours}))`
}

/** insertAnswer() failed its learner check: the learner a write was decided from has changed. */
export const isLearnerChanged = (err: unknown): boolean =>
  (err as { code?: string }).code === '23502' &&
  (err as { table_name?: string }).table_name === 'idempotency_records' &&
  (err as { column_name?: string }).column_name === 'request_hash'

export function createIdempotencyRepository(db: Db) {
  const learnerColumns = db.unsafe(LEARNER_COLUMNS)

  /**
   * The SELECT of a finished, unexpired answer for (key id, scope, key), not sent yet: find()
   * runs it, findWithLearner() joins it. With `withLegacy`, a record stored before records had a
   * key id counts too (the caller's own first).
   */
  const storedAnswer = (keyId: string, scope: string, key: string, withLegacy: boolean) =>
    withLegacy
      ? db<StoredAnswer[]>`
          select request_hash, status_code, response_body
          from idempotency_records
          where key_id in (${keyId}, ${LEGACY_RECORD_KEY_ID}) and scope = ${scope} and idempotency_key = ${key}
            and expires_at > now() and status_code is not null
          order by key_id desc
          limit 1`
      : db<StoredAnswer[]>`
          select request_hash, status_code, response_body
          from idempotency_records
          where key_id = ${keyId} and scope = ${scope} and idempotency_key = ${key}
            and expires_at > now() and status_code is not null`

  return {
    /** A finished, unexpired answer for (key id, scope, key), if any (see storedAnswer). */
    async find(keyId: string, scope: string, key: string, withLegacy = false): Promise<StoredAnswer | undefined> {
      const [row] = await storedAnswer(keyId, scope, key, withLegacy)
      return row
    },

    /**
     * find() and the learner a write is for, in one statement: the two reads every write on a
     * learner's behalf starts with, for one round trip and one statement instead of two.
     * `learner` is undefined when no user has the key.
     */
    async findWithLearner(
      keyId: string,
      scope: string,
      key: string,
      withLegacy: boolean,
      learnerKey: UserKey,
    ): Promise<{ stored: StoredAnswer | undefined; learner: User | undefined }> {
      const [row] = await db<(Partial<StoredAnswer> & Partial<User>)[]>`
        select s.request_hash, s.status_code, s.response_body, ${learnerColumns}
        from (values (1)) as one (x)
        left join lateral (${storedAnswer(keyId, scope, key, withLegacy)}) s on true
        left join users u on u.system_uuid = ${learnerKey.system_uuid} and u.system_user_id = ${learnerKey.system_user_id}`
      const { request_hash, status_code, response_body, ...learner } = row!
      return {
        stored: request_hash == null ? undefined : { request_hash, status_code: status_code!, response_body: response_body! },
        learner: learner.client_uuid == null ? undefined : (learner as User),
      }
    },

    /** True while some unexpired record predates key ids (key_id ''). */
    async legacyRecordsLive(): Promise<boolean> {
      const [row] = await db<{ live: boolean }[]>`
        select exists (select 1 from idempotency_records where key_id = ${LEGACY_RECORD_KEY_ID} and expires_at > now()) as live`
      return row?.live ?? false
    },

    /** Removes the caller's record for (scope, key) if it has expired (the purge has not reached it yet). */
    async deleteExpired(keyId: string, scope: string, key: string): Promise<void> {
      await db`delete from idempotency_records where key_id = ${keyId} and scope = ${scope} and idempotency_key = ${key} and expires_at <= now()`
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

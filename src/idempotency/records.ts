// SQL for stored answers (table idempotency_records), keyed by (key_id, scope, idempotency_key):
// every caller has its own keys. The rows are the ones every release since migration 0009 reads
// and writes (the answer as the JSON text that was sent), so replicas of the previous release
// and of this one share them during a rolling upgrade.
import type { PendingQuery, Row } from 'postgres'
import type { Db } from '../db/client.js'

/** Whose record: the caller's API key id, the write's scope and its Idempotency-Key. */
export interface RecordKey {
  keyId: string
  scope: string
  key: string
}

export interface StoredAnswer {
  request_hash: string
  status_code: number
  /** The answer's JSON text, exactly as it was sent. */
  response_body: string
}

/** The unexpired answer stored for the triple, if any. */
export async function findAnswer(db: Db, r: RecordKey): Promise<StoredAnswer | undefined> {
  const [row] = await db<StoredAnswer[]>`
    select request_hash, status_code, response_body
    from idempotency_records
    where key_id = ${r.keyId} and scope = ${r.scope} and idempotency_key = ${r.key}
      and expires_at > now() and status_code is not null`
  return row
}

/** An answer to store: the request's body hash, the status and JSON sent, and whom it is about. */
export interface AnswerToStore {
  hash: string
  status: number
  json: string
  /** The learner the answer is about (users.client_uuid): an erasure finds the record by it. */
  learner?: string | null
}

/** What lookupWith() returns: the record's columns (null when none is stored), and the read's. */
export type LookupRow = { [Column in keyof StoredAnswer]: StoredAnswer[Column] | null } & {
  read_found: boolean
  [column: string]: unknown
}

/**
 * findAnswer() and a caller's read in one statement: `read` returns at most one row, whose
 * columns are named apart from the record's and `read_found` (true when the read found its row).
 */
export async function lookupWith<Q extends Row>(db: Db, r: RecordKey, read: PendingQuery<Q[]>): Promise<LookupRow> {
  const [row] = await db<LookupRow[]>`
    select a.request_hash, a.status_code, a.response_body, r is distinct from null as read_found, r.*
    from (select) one
    left join idempotency_records a
      on a.key_id = ${r.keyId} and a.scope = ${r.scope} and a.idempotency_key = ${r.key}
        and a.expires_at > now() and a.status_code is not null
    left join (${read}) r on true`
  return row!
}

/**
 * The statement storing an answer: a transaction's last one, after its work (./store.ts).
 * It fails with a unique violation when a record holds the triple: a twin's, committed or not (a
 * transaction holding it uncommitted is waited for), or an expired one the purge has not reached.
 */
export function answerRecord(db: Db, r: RecordKey, answer: AnswerToStore, ttlHours: number) {
  return db`
    insert into idempotency_records (key_id, scope, idempotency_key, request_hash, status_code, response_body, expires_at,
                                     learner_uuid)
    values (${r.keyId}, ${r.scope}, ${r.key}, ${answer.hash}, ${answer.status}, ${answer.json},
            now() + make_interval(hours => ${ttlHours}), ${answer.learner ?? null}::uuid)`
}

/**
 * A write and its answer's record as ONE statement (atomic on its own: no transaction around it):
 * `write`, a data-modifying statement built but not sent, returns one row when it wrote and none
 * when what it was decided from has changed; the record is inserted only for a row it returns.
 * `alongside`, another data-modifying statement, runs in the same statement and reads the rows
 * `write` returned as `written` (an append to a log for the row written, say).
 * Resolves to whether it wrote. Fails as answerRecord() does when a record holds the triple (the
 * write is then undone with it).
 */
export async function writeWithAnswer(
  db: Db,
  write: PendingQuery<Row[]>,
  r: RecordKey,
  answer: AnswerToStore,
  ttlHours: number,
  alongside?: PendingQuery<Row[]>,
): Promise<boolean> {
  const result = await db`
    with written as (${write})${alongside ? db`, alongside as (${alongside})` : db``}
    insert into idempotency_records (key_id, scope, idempotency_key, request_hash, status_code, response_body, expires_at,
                                     learner_uuid)
    select ${r.keyId}, ${r.scope}, ${r.key}, ${answer.hash}, ${answer.status}, ${answer.json},
           now() + make_interval(hours => ${ttlHours}), ${answer.learner ?? null}::uuid
    from written`
  return result.count === 1
}

/** True for answerRecord()'s failure: another record holds the triple. */
export const isKeyTaken = (err: unknown): boolean =>
  (err as { code?: string } | null)?.code === '23505' &&
  (err as { constraint_name?: string }).constraint_name === 'idempotency_records_pkey'

/** Removes the triple's record if it has expired (the purge has not reached it yet); true when one went. */
export async function deleteExpired(db: Db, r: RecordKey): Promise<boolean> {
  const rows = await db`
    delete from idempotency_records
    where key_id = ${r.keyId} and scope = ${r.scope} and idempotency_key = ${r.key} and expires_at <= now()
    returning 1`
  return rows.length === 1
}

/** Deletes up to `limit` expired records; returns how many went. */
export async function purgeExpired(db: Db, limit = 1000): Promise<number> {
  const rows = await db`
    delete from idempotency_records
    where ctid in (select ctid from idempotency_records where expires_at <= now() limit ${limit})
    returning 1`
  return rows.length
}

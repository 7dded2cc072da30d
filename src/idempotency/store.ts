// A write stored with its answer's record, as the loop's store step (./index.ts) makes it: in one
// statement (a write decided from its read alone: the write and the record in one statement,
// written only if the row is still as read), or in one transaction (a write whose answer holds
// what only the database makes: the record inserted after the work, from its result).
import type { PendingQuery, Row } from 'postgres'
import type { Db } from '../db/client.js'
import { bounded, type DeadlineReason } from '../db/deadline.js'
import { answerRecord, writeWithAnswer } from './records.js'
import type { IdempotentRequest } from './request.js'

/** An answer to send: its status, its JSON text, and whether it is an earlier request's, replayed. */
export interface Answer {
  status: number
  json: string
  replayed: boolean
}

/** What the writes need of the database: the pool, its transactions, and the records' lifetime. */
export interface AnswerStore {
  sql: Db
  /** A transaction on a connection of its own, bounded by the request's deadline (src/db/transaction.ts). */
  transaction<R>(work: (tx: { sql: Db }) => Promise<R>): Promise<R>
  /** A statement on the pool, bounded by the request's deadline (src/db/deadline.ts). */
  inTime<V>(call: Promise<V>): Promise<V>
  ttlHours: number
}

/** The store over `db`; each statement on the pool counts a cut at its deadline in `db.usage`. */
export function answerStore(
  db: Pick<AnswerStore, 'sql' | 'transaction'> & { usage?: { countDeadline(reason: DeadlineReason): void } },
  ttlHours: number,
): AnswerStore {
  const countDeadline = db.usage?.countDeadline ?? (() => {})
  return {
    sql: db.sql,
    transaction: (work) => db.transaction(work),
    inTime: (call) => bounded(call, countDeadline),
    ttlHours,
  }
}

/** A write's decision: its success status (errors are thrown) and body, serialized by the route's response schema. */
export interface Decided<T> {
  status: 200 | 201 | 202
  body: T
  /** Fields sent in this answer only and never stored (a new secret): a replay answers `body` alone. */
  shownOnce?: Partial<T>
  /** The learner the answer is about (users.client_uuid), stored with it so that erasure finds it. */
  learner?: string
}

/**
 * The write and its answer's record as ONE statement (writeWithAnswer): `statement` (built, not
 * sent) writes only if its row is still the version read and returns one row when it did;
 * `alongside` runs in the same statement and reads that row as `written`. The answer, or
 * undefined when the statement wrote nothing.
 */
export async function inOneStatement<T>(
  db: AnswerStore,
  request: IdempotentRequest,
  decided: Decided<T> & { statement: PendingQuery<Row[]>; alongside?: PendingQuery<Row[]> },
): Promise<Answer | undefined> {
  const json = request.serialize(decided.status, decided.body)
  const stored = { hash: request.hash, status: decided.status, json, learner: decided.learner }
  const wrote = await db.inTime(
    writeWithAnswer(db.sql, decided.statement, request, stored, db.ttlHours, decided.alongside),
  )
  return wrote ? sent(request, decided, json) : undefined
}

/** `work` and then its answer's record, in one transaction: the answer, once committed. */
export function inTransaction<T>(
  db: AnswerStore,
  request: IdempotentRequest,
  work: (tx: Db) => Promise<Decided<T>>,
): Promise<Answer> {
  return db.transaction(async ({ sql: tx }) => {
    const decided = await work(tx)
    const json = request.serialize(decided.status, decided.body)
    const stored = { hash: request.hash, status: decided.status, json, learner: decided.learner }
    await answerRecord(tx, request, stored, db.ttlHours)
    return sent(request, decided, json)
  })
}

/** The answer sent for a write just stored: the stored JSON, with the shownOnce fields when there are. */
const sent = <T>(request: IdempotentRequest, decided: Decided<T>, json: string): Answer => ({
  status: decided.status,
  json: decided.shownOnce ? request.serialize(decided.status, { ...decided.body, ...decided.shownOnce }) : json,
  replayed: false,
})

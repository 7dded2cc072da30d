// Idempotent writes: the one entry point handlers call. One effect per (caller's key id, scope,
// Idempotency-Key), all three taken from the request (no handler names a scope):
// 1. an answer stored for the triple is replayed (same body hash: its status and JSON bytes, with
//    `Idempotent-Replayed: true` and the echoed `Idempotency-Key`) or refused with 409;
// 2. otherwise the work and its answer's record run in one transaction (fields the work marks
//    shownOnce, a new secret, are sent but never stored: a replay answers without them). The
//    record's primary key lets one transaction per triple commit: a concurrent twin waits on it, fails to store its
//    answer, rolls back its own work and replays the first answer (or gets 409). A business error
//    rolls back too, so only 2xx answers are stored; one met while waiting on a twin (its user row,
//    its slot move) gives way to the twin's answer when there is one.
// The work runs once per request, twice only when an expired record the purge has not reached
// yet held the triple (it is removed, and the write runs again). A handler's `read` (the owner of
// a write: 404 when there is none) is sent in the same statement as step 1 and only decides when
// no answer is stored; the work receives what it returned.
// A write decided from its read alone (ReadThenWrite: a review; POST, PUT and PATCH of a learner) skips
// the transaction: its read returns the row with its version, and its write and the record are one
// statement that writes only while the row is still that version; a row changed in between
// writes nothing, and the lookup and the decision are made again after a short jittered pause
// (docs/idempotency.md); a write that loses MAX_DECISIONS times answers 409 CONCURRENT_UPDATE with
// Retry-After, never the "key in progress" code: its key was never in use.
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { PendingQuery, Row } from 'postgres'
import type { Db } from '../db/client.js'
import { bounded, type DeadlineReason } from '../db/deadline.js'
import { AppError, appError } from '../errors.js'
import { idempotencyKeyError } from './key.js'
import {
  answerRecord,
  deleteExpired,
  findAnswer,
  isKeyTaken,
  lookupWith,
  type RecordKey,
  type StoredAnswer,
  writeWithAnswer,
} from './records.js'
import { requestHash } from './request-hash.js'
import { idempotencyScope } from './scope.js'

/** A write's answer: its success status (errors are thrown) and body, serialized by the route's response schema. */
export interface WriteResult<T> {
  status: 200 | 201 | 202
  body: T
  /** Fields sent in this answer only and never stored (a new secret): a replay answers `body` alone. */
  shownOnce?: Partial<T>
  /** The learner the answer is about (users.client_uuid), stored with it so that erasure finds it. */
  learner?: string
}

/**
 * A handler's read, sent in one statement with the stored-answer lookup: `query` (a fragment,
 * built but not sent) returns at most one row, its columns named apart from the record's
 * (request_hash, status_code, response_body) and `read_found`; `take` turns that row (undefined
 * when there was none) into what the work receives, or throws (a 404). It is called only when no
 * answer is stored.
 */
export interface Read<R, Q extends Row = Row> {
  query: PendingQuery<Q[]>
  take(row: Q | undefined): R
}

/**
 * A write decided from its read alone, made by one statement together with its answer's record
 * (no transaction: a statement is atomic). The read returns the row as it is now with its
 * version; `write` gets what `take` made of it and gives the answer and the statement. The
 * statement (built, not sent) changes the row only if its version is still the one read, and
 * returns one row when it did; when it returns none, the row changed in between (a concurrent
 * write): the lookup and the decision are made again, from the row as it is then.
 */
export interface ReadThenWrite<R, Q extends Row, T> extends Partial<Read<R, Q>> {
  /** `alongside`: a statement sent with `statement`, reading the rows it returned as `written` (writeWithAnswer). */
  write(read: R): WriteResult<T> & { statement: PendingQuery<Row[]>; alongside?: PendingQuery<Row[]> }
  /** The statement's own failure (a constraint it breaks) as the error to answer with; by default it is rethrown. */
  failed?(err: unknown): unknown
  /**
   * For a write that reads nothing (no `query`: its lookup is the record's alone, as a replay's),
   * what a statement that wrote nothing means when no twin's answer is stored: the error to
   * answer (a create's key taken). Without it, the row changed since it was read and the lookup
   * and the decision are made again.
   */
  unwritten?(): unknown
}

/** Retry-After of a write that lost every decision to concurrent writes of its row. */
export const CONCURRENT_UPDATE_RETRY_AFTER_SECONDS = 1

/**
 * The wait before deciding again after a concurrent write changed the row: random ("full
 * jitter") up to a bound that doubles with each lost decision, at most 40 ms, so that writers
 * who collided do not collide again in step.
 */
const contentionPause = (lost: number) =>
  new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(2 * 2 ** lost, 40)))

/** Decisions a write in one statement makes before it answers 409: each lost to a concurrent write. */
export const MAX_DECISIONS = 8

/** Runs the request's write exactly once and sends its answer; resolves to the JSON text sent. */
export interface AnswerIdempotently<Tx> {
  <T>(request: FastifyRequest, reply: FastifyReply, work: (tx: Tx) => Promise<WriteResult<T>>): Promise<string>
  <R, Q extends Row, T>(request: FastifyRequest, reply: FastifyReply, write: ReadThenWrite<R, Q, T>): Promise<string>
  <R, Q extends Row, T>(
    request: FastifyRequest,
    reply: FastifyReply,
    read: Read<R, Q>,
    work: (tx: Tx, read: R) => Promise<WriteResult<T>>,
  ): Promise<string>
}

/** What idempotency needs of the database: the pool, and a transaction whose context carries its sql. */
export interface IdempotencyDatabase<Tx extends { sql: Db }> {
  sql: Db
  /** Counts a request's database work cut at its deadline (each statement here is bounded by it). */
  usage?: { countDeadline(reason: DeadlineReason): void }
  transaction<R>(work: (tx: Tx) => Promise<R>): Promise<R>
}

export function createIdempotency<Tx extends { sql: Db }>(
  db: IdempotencyDatabase<Tx>,
  ttlHours: number,
): AnswerIdempotently<Tx> {
  const countDeadline = db.usage?.countDeadline ?? (() => {})
  const inTime = <V>(call: Promise<V>) => bounded(call, countDeadline)

  return async function answerIdempotently<R, T>(
    request: FastifyRequest,
    reply: FastifyReply,
    readOrWork: Read<R> | ReadThenWrite<R, Row, T> | ((tx: Tx) => Promise<WriteResult<T>>),
    workAfterRead?: (tx: Tx, read: R) => Promise<WriteResult<T>>,
  ): Promise<string> {
    // The key's presence and format were checked before the handler; this guards a route wired without.
    const key = request.headers['idempotency-key']
    const keyError = idempotencyKeyError(key)
    if (keyError) throw keyError
    if (!request.apiKey) throw appError('SECURITY_AUTH_REQUIRED')
    const operationId = (request.routeOptions.schema as { operationId: string }).operationId
    const who: RecordKey = {
      keyId: request.apiKey.id,
      scope: idempotencyScope(operationId, request.params as Record<string, string>),
      key: key as string,
    }
    const hash = requestHash(request.body)

    const send = (status: number, json: string, replayed: boolean) => {
      // Already JSON text with its content type: Fastify sends it as it is.
      reply.code(status).type('application/json; charset=utf-8')
      if (replayed) reply.header('idempotent-replayed', 'true').header('idempotency-key', who.key)
      return json
    }
    const replay = (stored: StoredAnswer) => {
      if (stored.request_hash !== hash) throw appError('IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD')
      return send(stored.status_code, stored.response_body, true)
    }

    const serialize = (status: number, body: unknown) =>
      reply.serializeInput(body as Record<string, unknown>, String(status)) as string

    // A write in one statement (ReadThenWrite): no transaction; see the module's comment.
    const inOneStatement = async (plan: ReadThenWrite<R, Row, T>): Promise<string> => {
      // Each decision lost to a concurrent write of the row is made again, up to MAX_DECISIONS;
      // an expired record is removed once, as for a transaction (step 3).
      let removedExpired = false
      for (let decision = 1; decision <= MAX_DECISIONS; decision++) {
        let read: R | undefined
        if (plan.query) {
          const row = await inTime(lookupWith(db.sql, who, plan.query))
          if (row.status_code !== null) return replay(row as StoredAnswer)
          read = plan.take!(row.read_found ? (row as Row) : undefined)
        } else {
          const stored = await inTime(findAnswer(db.sql, who))
          if (stored) return replay(stored)
        }
        const decided = plan.write(read as R)
        const json = serialize(decided.status, decided.body)
        let wrote: boolean
        try {
          wrote = await inTime(
            writeWithAnswer(
              db.sql,
              decided.statement,
              who,
              { hash, status: decided.status, json, learner: decided.learner },
              ttlHours,
              decided.alongside,
            ),
          )
        } catch (err) {
          if (!isKeyTaken(err)) throw plan.failed ? plan.failed(err) : err
          // A record holds the triple: a twin's answer, or an expired one the purge has not
          // reached (removed: the next decision writes).
          const winner = await inTime(findAnswer(db.sql, who))
          if (winner) return replay(winner)
          if (removedExpired || !(await inTime(deleteExpired(db.sql, who))))
            throw appError('IDEMPOTENCY_REQUEST_IN_PROGRESS')
          removedExpired = true
          continue
        }
        if (wrote)
          return send(
            decided.status,
            decided.shownOnce ? serialize(decided.status, { ...decided.body, ...decided.shownOnce }) : json,
            false,
          )
        if (plan.unwritten) {
          const winner = await inTime(findAnswer(db.sql, who))
          if (winner) return replay(winner)
          throw plan.unwritten()
        }
        if (decision < MAX_DECISIONS) await contentionPause(decision)
      }
      // Every decision lost to another write of the same row: the key is not in use, the row is.
      throw appError('CONCURRENT_UPDATE', { 'retry-after': String(CONCURRENT_UPDATE_RETRY_AFTER_SECONDS) })
    }
    if (typeof readOrWork !== 'function' && 'write' in readOrWork) return inOneStatement(readOrWork)

    let work: (tx: Tx) => Promise<WriteResult<T>>
    if (typeof readOrWork === 'function') {
      const stored = await inTime(findAnswer(db.sql, who))
      if (stored) return replay(stored)
      work = readOrWork
    } else {
      const row = await inTime(lookupWith(db.sql, who, readOrWork.query))
      if (row.status_code !== null) return replay(row as StoredAnswer)
      const read = readOrWork.take(row.read_found ? (row as Row) : undefined)
      work = (tx) => workAfterRead!(tx, read)
    }

    const write = () =>
      db.transaction(async (tx) => {
        const result = await work(tx)
        const json = serialize(result.status, result.body)
        const sent = result.shownOnce ? serialize(result.status, { ...result.body, ...result.shownOnce }) : json
        await answerRecord(tx.sql, who, { hash, status: result.status, json, learner: result.learner }, ttlHours)
        return { status: result.status, sent }
      })

    for (let attempt = 1; ; attempt++) {
      try {
        const answer = await write()
        return send(answer.status, answer.sent, false)
      } catch (err) {
        if (!isKeyTaken(err) && !(err instanceof AppError)) throw err
        const winner = await inTime(findAnswer(db.sql, who))
        if (winner) return replay(winner)
        if (!isKeyTaken(err)) throw err
        // No answer, yet a record held the triple: an expired one (gone now, so write again), or
        // one that expired after it made this write wait (the client may retry).
        if (attempt > 1 || !(await inTime(deleteExpired(db.sql, who))))
          throw appError('IDEMPOTENCY_REQUEST_IN_PROGRESS')
      }
    }
  }
}

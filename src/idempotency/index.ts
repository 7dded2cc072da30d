// Idempotent writes: one effect per (caller's key id, scope, Idempotency-Key), the triple and the
// body's hash taken from the request (./request.ts). A repository's write method
// (src/repositories/) gives answerIdempotently its read and its store, and the loop runs:
// 1. replay: an answer stored for the triple (looked up in one statement with the write's read)
//    is replayed when the body's hash is the same, or refused with 409;
// 2. decide: the read's row (404 when it has none) becomes what the write is decided from;
// 3. store: the write and its answer's record go together, in one statement or one transaction
//    (./store.ts); only 2xx answers are stored, never a field marked shownOnce.
// A record already holding the triple (a twin's, committed first) makes the store fail on the
// record's key: the twin's answer is replayed. A business error (AppError) met while waiting on a
// twin gives way to the twin's answer when there is one. An expired record the purge has not
// reached is removed once, and the write decided again. A write in one statement whose row
// changed after it was read writes nothing and is decided again after a short jittered pause;
// after MAX_DECISIONS lost decisions it answers 409 CONCURRENT_UPDATE with Retry-After, never the
// "key in progress" code: its key was never in use (docs/idempotency.md).
// Nothing here touches the HTTP reply: src/http/send-answer.ts sends the answer.
import type { PendingQuery, Row } from 'postgres'
import { AppError, appError } from '../errors.js'
import { deleteExpired, findAnswer, isKeyTaken, lookupWith, type StoredAnswer } from './records.js'
import type { IdempotentRequest } from './request.js'
import type { Answer, AnswerStore } from './store.js'

/** A repository's write, as the loop runs it. */
export interface IdempotentWrite<R, Q extends Row = Row> {
  /**
   * The write's read (built, not sent): sent in one statement with the stored-answer lookup, it
   * returns at most one row, its columns named apart from the record's (request_hash,
   * status_code, response_body, read_found). Without it, the lookup is the record's alone.
   */
  read?: PendingQuery<Q[]>
  /** What the write is decided from, made of the read's row (undefined: none); throws its 404. */
  take?(row: Q | undefined): R
  /** Decides and stores: the answer sent, or undefined when the row read has changed since (nothing written). */
  store(read: R): Promise<Answer | undefined>
}

/** Decisions a write in one statement makes before it answers 409: each lost to a concurrent write. */
export const MAX_DECISIONS = 8

/** Retry-After of a write that lost every decision to concurrent writes of its row. */
export const CONCURRENT_UPDATE_RETRY_AFTER_SECONDS = 1

/** The request's write, made once: its answer, or a stored one replayed. */
export async function answerIdempotently<R, Q extends Row>(
  db: AnswerStore,
  request: IdempotentRequest,
  write: IdempotentWrite<R, Q>,
): Promise<Answer> {
  let removedExpired = false
  for (let decision = 1; ; decision++) {
    // Replay: the stored answer, looked up with the write's read; else decide from that read.
    let read: R | undefined
    if (write.read) {
      const row = await db.inTime(lookupWith(db.sql, request, write.read))
      if (row.status_code !== null) return replay(request, row as StoredAnswer)
      read = write.take?.(row.read_found ? (row as unknown as Q) : undefined)
    } else {
      const stored = await db.inTime(findAnswer(db.sql, request))
      if (stored) return replay(request, stored)
    }
    // Store: the write with its answer's record; undefined when its row changed since the read.
    try {
      const answer = await write.store(read as R)
      if (answer) return answer
    } catch (err) {
      const keyTaken = isKeyTaken(err)
      if (!keyTaken && !(err instanceof AppError)) throw err
      const winner = await db.inTime(findAnswer(db.sql, request))
      if (winner) return replay(request, winner)
      if (!keyTaken) throw err
      // No answer, yet a record held the triple: an expired one (removed: decided again), or one
      // that expired after it made this write wait (the client may retry).
      if (removedExpired || !(await db.inTime(deleteExpired(db.sql, request))))
        throw appError('IDEMPOTENCY_REQUEST_IN_PROGRESS')
      removedExpired = true
      continue
    }
    // The row changed between the read and the write: the key is not in use, the row is.
    if (decision >= MAX_DECISIONS)
      throw appError('CONCURRENT_UPDATE', { 'retry-after': String(CONCURRENT_UPDATE_RETRY_AFTER_SECONDS) })
    await contentionPause(decision)
  }
}

function replay(request: IdempotentRequest, stored: StoredAnswer): Answer {
  if (stored.request_hash !== request.hash) throw appError('IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD')
  return { status: stored.status_code, json: stored.response_body, replayed: true }
}

/**
 * The wait before deciding again after a concurrent write changed the row: random ("full
 * jitter") up to a bound that doubles with each lost decision, at most 40 ms, so that writers
 * who collided do not collide again in step.
 */
const contentionPause = (lost: number) =>
  new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(2 * 2 ** lost, 40)))

export type { IdempotentRequest } from './request.js'
export { type Answer, type AnswerStore, type Decided, inOneStatement, inTransaction } from './store.js'

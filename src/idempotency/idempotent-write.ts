// Exactly-once writes keyed by (scope, Idempotency-Key):
// 1. a stored answer for the pair is replayed (same body hash) or refused with 409: one read;
// 2. otherwise one transaction does the business write and inserts the answer, whose primary
//    key (scope, key) lets only one transaction per pair commit. A concurrent request with the
//    same pair waits on that key, fails it once the first commits, rolls back its own work and
//    replays (or gets 409). Business errors roll back, so only successful answers are stored.
// The transaction costs two round trips beyond the work's own statements' latency: BEGIN is
// pipelined with the work's first statement, and COMMIT with the answer's INSERT (PostgreSQL
// answers the COMMIT of a transaction whose INSERT failed with a rollback).
// The answer is stored as the JSON text the route's serializer made, and a replay sends that
// text as it is: the same bytes, and no parse or serialization on the replay path.
import { appError, AppError } from '../errors.js'
import type { Database } from '../plugins/database.js'
import type { Repositories } from '../repositories/index.js'
import type { StoredAnswer } from '../repositories/idempotency.js'
import { isValidIdempotencyKey } from './key.js'
import { requestHash } from './request-hash.js'

export interface WriteResult<T> {
  status: number
  body: T
}
/** The answer to send: its status and its JSON text. */
export interface WriteOutcome {
  status: number
  json: string
  replayed: boolean
}
/** The route's response serializer for a status. */
export type SerializeAnswer = (status: number, body: unknown) => string
export type IdempotentWrite = <T>(
  scope: string,
  key: unknown,
  body: unknown,
  serialize: SerializeAnswer,
  work: (repos: Repositories) => Promise<WriteResult<T>>,
) => Promise<WriteOutcome>

const KEY_TAKEN = Symbol('key taken')

const isKeyTaken = (err: unknown) =>
  (err as { code?: string }).code === '23505' && (err as { constraint_name?: string }).constraint_name === 'idempotency_records_pkey'

export function createIdempotentWrite(db: Database, ttlHours: number): IdempotentWrite {
  /** One transaction: the work, then the answer; KEY_TAKEN when another request stored the pair first. */
  async function attempt<T>(
    scope: string,
    key: string,
    hash: string,
    serialize: SerializeAnswer,
    work: (repos: Repositories) => Promise<WriteResult<T>>,
  ): Promise<WriteOutcome | typeof KEY_TAKEN> {
    const connection = await db.reserve()
    try {
      const begun = connection.sql`begin`.execute()
      let answer: WriteOutcome
      try {
        const result = await work(connection.repos)
        answer = { status: result.status, json: serialize(result.status, result.body), replayed: false }
        await begun
      } catch (err) {
        await begun.catch(() => {})
        await connection.sql`rollback`
        throw err
      }
      const [recorded, committed] = await Promise.allSettled([
        connection.repos.idempotency.record(scope, key, hash, answer.status, answer.json, ttlHours),
        connection.sql`commit`.execute(),
      ])
      if (committed.status === 'rejected') throw committed.reason
      if (recorded.status === 'rejected') {
        if (isKeyTaken(recorded.reason)) return KEY_TAKEN
        throw recorded.reason
      }
      return answer
    } finally {
      connection.release()
    }
  }

  return async function idempotentWrite<T>(
    scope: string,
    key: unknown,
    body: unknown,
    serialize: SerializeAnswer,
    work: (repos: Repositories) => Promise<WriteResult<T>>,
  ): Promise<WriteOutcome> {
    if (key === undefined) throw appError('IDEMPOTENCY_KEY_REQUIRED')
    if (!isValidIdempotencyKey(key)) throw appError('IDEMPOTENCY_KEY_INVALID')
    const hash = requestHash(body)
    const replay = (stored: StoredAnswer): WriteOutcome => {
      if (stored.request_hash !== hash) throw appError('IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD')
      return { status: stored.status_code, json: stored.response_body, replayed: true }
    }

    const stored = await db.repos.idempotency.find(scope, key)
    if (stored) return replay(stored)

    for (let tries = 0; tries < 2; tries++) {
      let result: WriteOutcome | typeof KEY_TAKEN
      try {
        result = await attempt(scope, key, hash, serialize, work)
      } catch (err) {
        // A business error may come from waiting on a concurrent twin that has now committed
        // (its user row, its slot move): the pair's answer, if there is one, is the answer.
        if (!(err instanceof AppError)) throw err
        const winner = await db.repos.idempotency.find(scope, key)
        if (winner) return replay(winner)
        throw err
      }
      if (result !== KEY_TAKEN) return result
      const winner = await db.repos.idempotency.find(scope, key)
      if (winner) return replay(winner)
      // The pair's record has expired but is not purged yet: take it over once.
      await db.repos.idempotency.deleteExpired(scope, key)
    }
    throw appError('IDEMPOTENCY_REQUEST_IN_PROGRESS')
  }
}

// Exactly-once writes keyed by (scope, Idempotency-Key):
// 1. a stored answer for the pair is replayed (same body hash) or refused with 409: one read;
// 2. otherwise one transaction does the business write and inserts the answer, whose primary
//    key (scope, key) lets only one transaction per pair commit. A concurrent request with the
//    same pair waits on that key, fails it once the first commits, rolls back its own work and
//    replays (or gets 409). Business errors roll back, so only successful answers are stored.
// The transaction costs two round trips beyond the work's own statements' latency: BEGIN is
// pipelined with the work's first statement, and COMMIT with the answer's INSERT (PostgreSQL
// answers the COMMIT of a transaction whose INSERT failed with a rollback).
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
export interface WriteOutcome<T> extends WriteResult<T> {
  replayed: boolean
}
export type IdempotentWrite = <T>(
  scope: string,
  key: unknown,
  body: unknown,
  work: (repos: Repositories) => Promise<WriteResult<T>>,
) => Promise<WriteOutcome<T>>

const KEY_TAKEN = Symbol('key taken')

const isKeyTaken = (err: unknown) =>
  (err as { code?: string }).code === '23505' && (err as { constraint_name?: string }).constraint_name === 'idempotency_records_pkey'

export function createIdempotentWrite(db: Database, ttlHours: number): IdempotentWrite {
  /** One transaction: the work, then the answer; KEY_TAKEN when another request stored the pair first. */
  async function attempt<T>(scope: string, key: string, hash: string, work: (repos: Repositories) => Promise<WriteResult<T>>) {
    const connection = await db.reserve()
    try {
      const begun = connection.sql`begin`.execute()
      let result: WriteResult<T>
      try {
        result = await work(connection.repos)
        await begun
      } catch (err) {
        await begun.catch(() => {})
        await connection.sql`rollback`
        throw err
      }
      const [recorded, committed] = await Promise.allSettled([
        connection.repos.idempotency.record(scope, key, hash, result.status, result.body, ttlHours),
        connection.sql`commit`.execute(),
      ])
      if (committed.status === 'rejected') throw committed.reason
      if (recorded.status === 'rejected') {
        if (isKeyTaken(recorded.reason)) return KEY_TAKEN
        throw recorded.reason
      }
      return result
    } finally {
      connection.release()
    }
  }

  return async function idempotentWrite<T>(scope: string, key: unknown, body: unknown, work: (repos: Repositories) => Promise<WriteResult<T>>) {
    if (key === undefined) throw appError('IDEMPOTENCY_KEY_REQUIRED')
    if (!isValidIdempotencyKey(key)) throw appError('IDEMPOTENCY_KEY_INVALID')
    const hash = requestHash(body)
    const replay = (stored: StoredAnswer): WriteOutcome<T> => {
      if (stored.request_hash !== hash) throw appError('IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD')
      return { status: stored.status_code, body: stored.response_body as T, replayed: true }
    }

    const stored = await db.repos.idempotency.find(scope, key)
    if (stored) return replay(stored)

    for (let tries = 0; tries < 2; tries++) {
      let result: WriteResult<T> | typeof KEY_TAKEN
      try {
        result = await attempt(scope, key, hash, work)
      } catch (err) {
        // A business error may come from waiting on a concurrent twin that has now committed
        // (its user row, its slot move): the pair's answer, if there is one, is the answer.
        if (!(err instanceof AppError)) throw err
        const winner = await db.repos.idempotency.find(scope, key)
        if (winner) return replay(winner)
        throw err
      }
      if (result !== KEY_TAKEN) return { ...result, replayed: false }
      const winner = await db.repos.idempotency.find(scope, key)
      if (winner) return replay(winner)
      // The pair's record has expired but is not purged yet: take it over once.
      await db.repos.idempotency.deleteExpired(scope, key)
    }
    throw appError('IDEMPOTENCY_REQUEST_IN_PROGRESS')
  }
}

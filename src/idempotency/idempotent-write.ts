// Exactly-once writes keyed by (scope, Idempotency-Key):
// 1. a finished answer for the pair is replayed (same body hash) or refused with 409;
// 2. otherwise one transaction claims the pair, does the business write and stores the answer.
//    A concurrent request with the same pair waits on the claim, then replays or gets 409.
// Business errors roll the transaction back, so only successful answers are ever stored.
import { appError } from '../errors.js'
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

export function createIdempotentWrite(db: Database, ttlHours: number): IdempotentWrite {
  return async (scope, key, body, work) => {
    if (key === undefined) throw appError('IDEMPOTENCY_KEY_REQUIRED')
    if (!isValidIdempotencyKey(key)) throw appError('IDEMPOTENCY_KEY_INVALID')
    const hash = requestHash(body)
    const replay = (stored: StoredAnswer) => {
      if (stored.request_hash !== hash) throw appError('IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD')
      return { status: stored.status_code, body: stored.response_body as never, replayed: true }
    }

    const stored = await db.repos.idempotency.find(scope, key)
    if (stored) return replay(stored)

    return db.transaction(async (repos) => {
      if (!(await repos.idempotency.claim(scope, key, hash, ttlHours))) {
        // The claim waited for a concurrent holder of the pair that has committed meanwhile.
        const winner = await repos.idempotency.find(scope, key)
        if (!winner) throw appError('IDEMPOTENCY_REQUEST_IN_PROGRESS')
        return replay(winner)
      }
      const result = await work(repos)
      await repos.idempotency.complete(scope, key, result.status, result.body)
      return { ...result, replayed: false }
    })
  }
}

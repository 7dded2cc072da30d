// Exactly-once writes keyed by (key id, scope, Idempotency-Key):
// 1. a stored answer for the triple is replayed (same body hash) or refused with 409: one read
//    (which also reads the learner, for a write on a learner's behalf: 404 when there is none);
// 2. otherwise one pipelined transaction (src/db/transaction.ts) does the business write and
//    inserts the answer, whose primary key lets only one transaction per triple commit. A
//    concurrent request with the same triple waits on that key, fails it once the first
//    commits, rolls back its own work and replays (or gets 409). Business errors roll back,
//    so only successful answers are stored.
// A write for a learner this replica has read recently (known-learners.ts) skips step 1 and
// goes straight to step 2 with that learner: a stored answer then shows as the key taken, and
// the answer's INSERT also checks that the learner is unchanged. Anything else it meets (a
// business error, a changed or missing learner) sends it through steps 1 and 2 as above, so
// every answer is the one those steps give; a replay costs the rolled-back transaction more.
// The answer is stored as the JSON text the route's serializer made, and a replay sends that
// text as it is: the same bytes, and no parse or serialization on the replay path.
import { appError, AppError } from '../errors.js'
import { inPipelinedTransaction, type ReservingDatabase } from '../db/transaction.js'
import type { Repositories } from '../repositories/index.js'
import { insertAnswer, isLearnerChanged, type LearnerCheck, type StoredAnswer } from '../repositories/idempotency.js'
import type { User, UserKey } from '../repositories/users.js'
import { createKnownLearners, learnerCheck, type KnownLearners } from './known-learners.js'
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

/** Whose write it is and under which scope and key. */
export interface WriteIdentity {
  keyId: string
  /** The caller may also replay records stored before records had a key id (API_KEYS keys). */
  legacyRecords: boolean
  scope: string
  /** A valid Idempotency-Key (checked before). */
  key: string
}

/**
 * The work of a write: with a learner key, it gets the learner (read with the stored answer
 * before the transaction, or earlier: see known-learners.ts); without one, `undefined`. Of the
 * learner, a work may rely on its client_uuid and time zone: the two fields the answer's INSERT
 * checks are still the stored ones.
 */
export type WriteWork<T> = (repos: Repositories, learner: User | undefined) => Promise<WriteResult<T>>

export type IdempotentWrite = <T>(
  who: WriteIdentity,
  body: unknown,
  serialize: SerializeAnswer,
  work: WriteWork<T>,
  learnerKey?: UserKey,
) => Promise<WriteOutcome>

const KEY_TAKEN = Symbol('key taken')

const isKeyTaken = (err: unknown) =>
  (err as { code?: string }).code === '23505' && (err as { constraint_name?: string }).constraint_name === 'idempotency_records_pkey'
/** A row that must reference a learner could not: the learner a write was decided from is gone. */
const isForeignKeyViolation = (err: unknown) => (err as { code?: string }).code === '23503'

/** How often the service looks again for records that predate key ids. */
const LEGACY_CHECK_MS = 10_000

/**
 * Whether records from before key ids may still be live. Until a check has answered, and
 * while any is live, API_KEYS keys look them up too; once they have all expired (at most a
 * TTL after the upgrade) that second lookup value is dropped from the query. Checked again
 * every 10 s in the background (a replica of the previous version may still write them
 * during a rolling upgrade); a failed check keeps the last answer.
 */
function legacyRecordsTracker(db: { repos: Repositories }) {
  let live = true
  let nextCheck = 0
  return {
    mayExist(): boolean {
      const now = Date.now()
      if (now >= nextCheck) {
        nextCheck = now + LEGACY_CHECK_MS
        db.repos.idempotency.legacyRecordsLive().then((answer) => { live = answer }, () => {})
      }
      return live
    },
  }
}

export function createIdempotentWrite(
  db: ReservingDatabase & { repos: Repositories },
  ttlHours: number,
  learners: KnownLearners = createKnownLearners(),
): IdempotentWrite {
  const legacy = legacyRecordsTracker(db)
  /**
   * One transaction: the work, then the answer (which checks `check`, when given); KEY_TAKEN
   * when another request stored the triple first.
   */
  async function attempt<T>(
    who: WriteIdentity,
    hash: string,
    serialize: SerializeAnswer,
    work: WriteWork<T>,
    learner: User | undefined,
    check?: LearnerCheck,
  ): Promise<WriteOutcome | typeof KEY_TAKEN> {
    try {
      return await inPipelinedTransaction(
        db,
        async (repos) => {
          const result = await work(repos, learner)
          return { status: result.status, json: serialize(result.status, result.body), replayed: false }
        },
        (sql, answer) =>
          insertAnswer(sql, { keyId: who.keyId, scope: who.scope, key: who.key, hash, status: answer.status, body: answer.json, ttlHours, learner: check }),
      )
    } catch (err) {
      if (isKeyTaken(err)) return KEY_TAKEN
      throw err
    }
  }

  /**
   * attempt() with a learner read earlier, checked where the answer is stored; undefined when a
   * fresh read must decide: a business error or a missing row (both may come from a stale
   * learner), or a learner that has changed.
   */
  async function attemptWithKnownLearner<T>(
    who: WriteIdentity,
    hash: string,
    serialize: SerializeAnswer,
    work: WriteWork<T>,
    learnerKey: UserKey,
    learner: User,
  ): Promise<WriteOutcome | typeof KEY_TAKEN | undefined> {
    try {
      return await attempt(who, hash, serialize, work, learner, learnerCheck(learnerKey, learner))
    } catch (err) {
      if (err instanceof AppError || isForeignKeyViolation(err) || isLearnerChanged(err)) return undefined
      throw err
    }
  }

  return async function idempotentWrite<T>(
    who: WriteIdentity,
    body: unknown,
    serialize: SerializeAnswer,
    work: WriteWork<T>,
    learnerKey?: UserKey,
  ): Promise<WriteOutcome> {
    const hash = requestHash(body)
    const replay = (stored: StoredAnswer): WriteOutcome => {
      if (stored.request_hash !== hash) throw appError('IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD')
      return { status: stored.status_code, json: stored.response_body, replayed: true }
    }
    const withLegacy = who.legacyRecords && legacy.mayExist()
    const findStored = () => db.repos.idempotency.find(who.keyId, who.scope, who.key, withLegacy)

    // A known learner: the transaction at once. A legacy record would not take the caller's key,
    // so while such records may be live the lookup comes first.
    const known = learnerKey && !withLegacy ? learners.get(learnerKey) : undefined
    if (known && learnerKey) {
      const result = await attemptWithKnownLearner(who, hash, serialize, work, learnerKey, known)
      if (result === KEY_TAKEN) {
        const winner = await findStored()
        if (winner) return replay(winner)
      } else if (result) {
        return result
      }
      // Not decided yet: the steps below decide, from a fresh read of the learner.
    }

    let learner: User | undefined
    if (learnerKey) {
      const first = await db.repos.idempotency.findWithLearner(who.keyId, who.scope, who.key, withLegacy, learnerKey)
      if (first.stored) return replay(first.stored)
      if (!first.learner) {
        learners.forget(learnerKey)
        // The same 404 the work's own lookup of the learner gave when it ran in the transaction.
        throw appError('USER_NOT_FOUND')
      }
      learner = first.learner
      learners.remember(learnerKey, learner)
    } else {
      const stored = await findStored()
      if (stored) return replay(stored)
    }

    for (let tries = 0; tries < 2; tries++) {
      let result: WriteOutcome | typeof KEY_TAKEN
      try {
        result = await attempt(who, hash, serialize, work, learner)
      } catch (err) {
        // A business error may come from waiting on a concurrent twin that has now committed
        // (its user row, its slot move): the triple's answer, if there is one, is the answer.
        if (!(err instanceof AppError)) throw err
        const winner = await findStored()
        if (winner) return replay(winner)
        throw err
      }
      if (result !== KEY_TAKEN) return result
      const winner = await findStored()
      if (winner) return replay(winner)
      // The triple's record has expired but is not purged yet: take it over once.
      await db.repos.idempotency.deleteExpired(who.keyId, who.scope, who.key)
    }
    throw appError('IDEMPOTENCY_REQUEST_IN_PROGRESS')
  }
}

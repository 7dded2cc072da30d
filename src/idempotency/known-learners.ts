// The learners this replica has recently read for writes on their behalf, by system key. A
// write for a known learner starts its transaction at once: no statement before it to look for
// a stored answer (the answer's primary key finds a replay when the transaction ends) or to
// read the learner. What it was decided from is checked where it commits: the answer's INSERT
// fails unless the learner with that key still has that client_uuid and time zone
// (insertAnswer). So an entry can be stale, never wrong: the write is then decided again from a
// fresh read. Bounded, least recently used first out.
import { LRUCache } from 'lru-cache'
import type { LearnerCheck } from '../repositories/idempotency.js'
import type { User, UserKey } from '../repositories/users.js'

/** Enough for the learners active on one replica at a time; a learner left out is only read again. */
const KNOWN_LEARNERS_MAX = 10_000

/** What a write for `key` decided from `learner` has its answer's INSERT check. */
export function learnerCheck(key: UserKey, learner: User): LearnerCheck {
  return { system_user_id: key.system_user_id, system_uuid: key.system_uuid, client_uuid: learner.client_uuid, timezone: learner.timezone }
}

// UUIDs are compared case-insensitively by PostgreSQL: one entry per learner however it is spelled.
const cacheKey = (key: UserKey) => `${key.system_uuid.toLowerCase()} ${key.system_user_id}`

export function createKnownLearners(max = KNOWN_LEARNERS_MAX) {
  const learners = new LRUCache<string, User>({ max })
  return {
    get: (key: UserKey): User | undefined => learners.get(cacheKey(key)),
    remember: (key: UserKey, learner: User): void => void learners.set(cacheKey(key), learner),
    forget: (key: UserKey): void => void learners.delete(cacheKey(key)),
  }
}

export type KnownLearners = ReturnType<typeof createKnownLearners>

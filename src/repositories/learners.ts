// SQL that spans a learner's whole footprint: the erasure (a transaction's statements; run it
// through db.transaction) and the export (src/repositories/learner-export.ts).
import type { Db } from '../db/client.js'
import type { UserKey } from './users.js'

/** How many rows of each kind one erasure removed. */
export interface Erased {
  users: number
  conspectuses: number
  error_logs: number
  stored_answers: number
}

export function createLearnerRepository(db: Db) {
  return {
    /**
     * Erases the learner and everything that holds them; undefined when no user has the key.
     * Must run in a transaction (READ COMMITTED: each statement sees what committed before it).
     *
     * Order is what makes racing writes safe:
     * 1. The user row is locked FOR UPDATE. Inserts of notes and error logs take a KEY SHARE lock
     *    on it through their foreign key: one in flight makes this wait until it commits (its
     *    rows and stored answer are then erased below); one arriving later waits for this
     *    transaction and then fails its foreign key (it answers 404). PUT/PATCH of the user wait
     *    the same way and then find no row.
     * 2. Notes, then error logs (a note DELETE locks its note, then its error logs: the same order,
     *    so the two never wait on each other in a cycle). A note's reviews go with it (the review
     *    log's ON DELETE CASCADE: the note, then its reviews, the order a note DELETE and a review
     *    take them in). A review or edit in flight holds its note: the DELETE waits for it to
     *    commit, so its stored answer is visible to step 3; one arriving later finds the note
     *    gone and answers 404.
     * 3. Stored answers, by any key: every answer is the JSON a write sent, and each one about
     *    this learner names the user (client_uuid, or the owner key), one of the notes or one of
     *    the error logs just deleted. The user's own PUT/PATCH scopes (the path names the
     *    learner) go too. Records hold at most IDEMPOTENCY_TTL_HOURS of writes: the scan reads that.
     * 4. The user row.
     */
    async erase(key: UserKey): Promise<Erased | undefined> {
      const [owner] = await db<{ client_uuid: string }[]>`
        select client_uuid from users
        where system_uuid = ${key.system_uuid} and system_user_id = ${key.system_user_id}
        for update`
      if (!owner) return undefined
      const userId = owner.client_uuid

      const notes = await db<{ id: string }[]>`
        delete from conspectuses where user_id = ${userId} returning conspectus_uuid::text as id`
      const logs = await db<{ id: string }[]>`
        delete from error_logs where user_id = ${userId} returning error_log_uuid::text as id`

      const systemUuid = key.system_uuid.toLowerCase()
      const userScope = `/api/v1/user/${systemUuid}/${key.system_user_id}`
      const answers = await db`
        delete from idempotency_records r
        where (r.key_id, r.scope, r.idempotency_key) in (
          select key_id, scope, idempotency_key
          from idempotency_records, lateral (select response_body::jsonb as b) answer
          where scope in (${userScope}, ${`PATCH ${userScope}`})
             or (response_body is not null and (
                  b ->> 'client_uuid' = ${userId}
                  or (b ->> 'system_user_id' = ${key.system_user_id} and b ->> 'system_uuid' = ${systemUuid})
                  or b ->> 'conspectus_uuid' = any(${notes.map((n) => n.id)}::text[])
                  or b ->> 'error_log_uuid' = any(${logs.map((l) => l.id)}::text[])))
        )
        returning 1`

      await db`delete from users where client_uuid = ${userId}`
      return { users: 1, conspectuses: notes.length, error_logs: logs.length, stored_answers: answers.length }
    },
  }
}

export type LearnerRepository = ReturnType<typeof createLearnerRepository>

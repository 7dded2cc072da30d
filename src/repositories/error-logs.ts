// SQL for the learning-mistake log (table error_logs): newest first, keyset pages; the idempotent
// write (POST of an entry) answers with the entry.
import type { Db } from '../db/client.js'
import type { components } from '../../generated/api.js'
import { appError } from '../errors.js'
import {
  type Answer,
  type AnswerStore,
  answerIdempotently,
  type IdempotentRequest,
  inTransaction,
} from '../idempotency/index.js'
import { jsonb } from '../library-types.js'
import type { TimeKeyPosition as PagePosition } from '../pagination/cursor.js'
import { keysetPage } from '../pagination/keyset-page.js'
import { createConspectusRepository } from './conspectuses.js'
import { answerMissingParent } from './missing-parent.js'
import { type Owner, ownerQuery, takeOwner, type UserKey } from './users.js'

export type { PagePosition }
export type ErrorLog = components['schemas']['ErrorLogResponse']

export interface NewErrorLog {
  message: string
  conspectus_uuid: string | null
  context: Record<string, unknown> | null
}

export function createErrorLogRepository(db: Db) {
  return {
    /** Answers 404 when the owner or the linked note went after they were read. */
    async create(userId: string, entry: NewErrorLog): Promise<ErrorLog> {
      const [row] = await db<ErrorLog[]>`
        with inserted as (
          insert into error_logs (user_id, conspectus_uuid, message, context)
          values (${userId}, ${entry.conspectus_uuid}, ${entry.message}, ${entry.context === null ? null : jsonb(db, entry.context)})
          returning *
        )
        select i.error_log_uuid, u.system_user_id, u.system_uuid, i.conspectus_uuid, i.message, i.context, i.created_at
        from inserted i join users u on u.client_uuid = i.user_id`.catch(answerMissingParent)
      return row!
    },

    /** Up to `limit` rows after `after` (exclusive), plus the position of the last one. */
    async page(userId: string, options: { conspectusUuid?: string; after?: PagePosition; limit: number }) {
      const rows = await db<(ErrorLog & { position_ts: string })[]>`
        select e.error_log_uuid, u.system_user_id, u.system_uuid, e.conspectus_uuid, e.message, e.context, e.created_at,
               to_char(e.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as position_ts
        from error_logs e join users u on u.client_uuid = e.user_id
        where e.user_id = ${userId}
          ${options.conspectusUuid ? db`and e.conspectus_uuid = ${options.conspectusUuid}` : db``}
          ${options.after ? db`and (e.created_at, e.error_log_uuid) < (${options.after.created_at}::text::timestamptz, ${options.after.id}::uuid)` : db``}
        order by e.created_at desc, e.error_log_uuid desc
        limit ${options.limit + 1}`
      return keysetPage(rows, options.limit, (row) => row.error_log_uuid)
    },
  }
}

export type ErrorLogRepository = ReturnType<typeof createErrorLogRepository>

/** The idempotent write of the log (src/idempotency/). */
export function createErrorLogWrites(db: AnswerStore) {
  return {
    /**
     * POST /api/v1/errors: the entry of the owner read in the answer lookup, with the note it
     * names checked to be the owner's (404 CONS_404), inserted in one transaction with its
     * answer's record.
     */
    create(request: IdempotentRequest, owner: UserKey, entry: NewErrorLog): Promise<Answer> {
      return answerIdempotently(db, request, {
        read: ownerQuery(db.sql, owner),
        take: takeOwner,
        store: (owner: Owner) =>
          inTransaction(db, request, async (tx) => {
            const note = entry.conspectus_uuid
            if (note && !(await createConspectusRepository(tx).exists(owner.client_uuid, note)))
              throw appError('CONSPECTUS_NOT_FOUND')
            const created = await createErrorLogRepository(tx).create(owner.client_uuid, entry)
            return { status: 201, body: created, learner: owner.client_uuid }
          }),
      })
    },
  }
}

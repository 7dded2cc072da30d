// SQL for the learning-mistake log (table error_logs): newest first, keyset pages.
import type { Db } from '../db/client.js'
import type { components } from '../../generated/api.js'
import { jsonb } from '../library-types.js'
import type { TimeKeyPosition as PagePosition } from '../pagination/cursor.js'
import { keysetPage } from '../pagination/keyset-page.js'

export type { PagePosition }
export type ErrorLog = components['schemas']['ErrorLogResponse']

/**
 * Thrown when an insert names a row that is gone: the owner (erased after the write read it) or
 * the linked conspectus (deleted after the write checked it). The write answers 404.
 */
export class MissingParent extends Error {
  constructor(readonly parent: 'user' | 'conspectus') {
    super(`${parent} is gone`)
  }
}

const PARENT_OF_CONSTRAINT: Record<string, MissingParent['parent']> = {
  conspectuses_user_id_fkey: 'user',
  error_logs_user_id_fkey: 'user',
  error_logs_conspectus_uuid_fkey: 'conspectus',
}

/** Turns a foreign-key violation of an insert into MissingParent; rethrows anything else. */
export function rethrowMissingParent(err: unknown): never {
  const parent = PARENT_OF_CONSTRAINT[(err as { constraint_name?: string }).constraint_name ?? '']
  if ((err as { code?: string }).code === '23503' && parent) throw new MissingParent(parent)
  throw err
}

export interface NewErrorLog {
  message: string
  conspectus_uuid: string | null
  context: Record<string, unknown> | null
}

export function createErrorLogRepository(db: Db) {
  return {
    async create(userId: string, entry: NewErrorLog): Promise<ErrorLog> {
      const [row] = await db<ErrorLog[]>`
        with inserted as (
          insert into error_logs (user_id, conspectus_uuid, message, context)
          values (${userId}, ${entry.conspectus_uuid}, ${entry.message}, ${entry.context === null ? null : jsonb(db, entry.context)})
          returning *
        )
        select i.error_log_uuid, u.system_user_id, u.system_uuid, i.conspectus_uuid, i.message, i.context, i.created_at
        from inserted i join users u on u.client_uuid = i.user_id`.catch(rethrowMissingParent)
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

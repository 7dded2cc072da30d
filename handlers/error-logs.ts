// createErrorLog and listErrorLogs.
import { appError } from '../src/errors.js'
import { decodeCursor, encodeCursor } from '../src/pagination/cursor.js'
import { invalidQueryParameter } from '../src/validation/request-validation-error.js'
import { answerMissingParent, ownerRead, requireOwner } from './owner.js'
import type { HandlerDeps, ServiceHandlers } from './types.js'

export function createErrorLogHandlers({
  db,
  answerIdempotently,
}: HandlerDeps): ServiceHandlers<'createErrorLog' | 'listErrorLogs'> {
  return {
    async createErrorLog(request, reply) {
      const body = request.body
      return answerIdempotently(request, reply, ownerRead(db, body), async ({ repos }, owner) => {
        const conspectusUuid = body.conspectus_uuid ?? null
        if (conspectusUuid && !(await repos.conspectuses.exists(owner.client_uuid, conspectusUuid))) {
          throw appError('CONSPECTUS_NOT_FOUND')
        }
        const entry = await answerMissingParent(
          repos.errorLogs.create(owner.client_uuid, {
            message: body.message,
            conspectus_uuid: conspectusUuid,
            context: body.context ?? null,
          }),
        )
        return { status: 201, body: entry, learner: owner.client_uuid }
      })
    },

    async listErrorLogs(request) {
      const { system_user_id, system_uuid, conspectus_uuid, limit, cursor } = request.query
      const after = cursor === undefined ? undefined : decodeCursor(cursor)
      if (after === null) throw invalidQueryParameter('cursor', cursor, 'is not a cursor this service issued')
      const owner = await requireOwner(db.repos, { system_user_id, system_uuid })
      const page = await db.repos.errorLogs.page(owner.client_uuid, {
        conspectusUuid: conspectus_uuid,
        after,
        limit: limit ?? 20,
      })
      return { items: page.items, next_cursor: page.next ? encodeCursor(page.next) : null }
    },
  }
}

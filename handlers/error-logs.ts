// createErrorLog and listErrorLogs.
import { sendAnswer } from '../src/http/send-answer.js'
import { idempotentRequest } from '../src/idempotency/request.js'
import { decodeCursor, encodeCursor } from '../src/pagination/cursor.js'
import { invalidQueryParameter } from '../src/validation/request-validation-error.js'
import { requireOwner } from './owner.js'
import type { HandlerDeps, ServiceHandlers } from './types.js'

export function createErrorLogHandlers({
  db,
  writes,
}: HandlerDeps): ServiceHandlers<'createErrorLog' | 'listErrorLogs'> {
  return {
    // src/repositories/error-logs.ts: the entry and its answer's record in one transaction.
    async createErrorLog(request, reply) {
      const body = request.body
      const entry = {
        message: body.message,
        conspectus_uuid: body.conspectus_uuid ?? null,
        context: body.context ?? null,
      }
      return sendAnswer(reply, await writes.errorLogs.create(idempotentRequest(request, reply), body, entry))
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

// exportUser and eraseUser: a learner's data as a whole.
import { appError } from '../src/errors.js'
import { openLearnerExport } from '../src/repositories/learner-export.js'
import type { HandlerDeps, ServiceHandlers, SuccessBody } from './types.js'

export function createLearnerDataHandlers({ db, now }: HandlerDeps): ServiceHandlers<'exportUser' | 'eraseUser'> {
  return {
    async exportUser(request, reply) {
      const body = await openLearnerExport(db.sql, request.params, now())
      if (!body) throw appError('USER_NOT_FOUND')
      // A stream is sent as it is, past the response serializer: the module writes the schema's JSON.
      return reply.type('application/json; charset=utf-8').send(body)
    },

    // No Idempotency-Key: a stored answer or scope would name the learner this erases. A repeated
    // call answers 404 USER_404 (already gone).
    async eraseUser(request): Promise<SuccessBody<'eraseUser', 200>> {
      const erased = await db.transaction((tx) => tx.repos.learners.erase(request.params))
      if (!erased) throw appError('USER_NOT_FOUND')
      // Who erased (the key id) and how much; never the learner's key or anything about them.
      request.log.info({ key_id: request.apiKeyId, erased }, 'learner erased')
      return { deleted: true, erased }
    },
  }
}

// A learner's data as a whole: export and erasure by system key, and by identity (client_uuid),
// which also reaches a learner whose system_uuid was cleared; reading a learner by identity.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { appError } from '../src/errors.js'
import { type LearnerLocator, openLearnerExport } from '../src/repositories/learner-export.js'
import type { HandlerDeps, ServiceHandlers } from './types.js'

type LearnerDataOperations =
  | 'exportUser'
  | 'eraseUser'
  | 'getUserByClientUuid'
  | 'exportUserByClientUuid'
  | 'eraseUserByClientUuid'

/**
 * Whether the request's key may reach a learner found by identity: a key limited to systems
 * reaches only learners of those systems (none without a system). Decided after the lookup, so
 * the handlers answer every other learner as absent (404), telling the key nothing.
 */
function reachable(request: FastifyRequest) {
  const systems = request.apiKey?.systems
  return (learner: { system_uuid: string | null }) =>
    !systems || (learner.system_uuid !== null && systems.has(learner.system_uuid.toLowerCase()))
}

export function createLearnerDataHandlers({ db, now, config }: HandlerDeps): ServiceHandlers<LearnerDataOperations> {
  async function sendExport(
    reply: FastifyReply,
    learner: LearnerLocator,
    visible?: (user: { system_uuid: string | null }) => boolean,
  ) {
    const body = await openLearnerExport(db.exportPool, learner, now(), visible)
    if (!body) throw appError('USER_NOT_FOUND')
    cutStalledReader(reply, config.export.writeTimeoutMs)
    // A stream is sent as it is, past the response serializer: the module writes the schema's JSON.
    return reply.type('application/json; charset=utf-8').send(body)
  }

  // No Idempotency-Key: a stored answer or scope would name the learner this erases. A repeated
  // call answers 404 USER_404 (already gone).
  async function erase(
    request: FastifyRequest,
    learner: LearnerLocator,
    visible?: (user: { system_uuid: string | null }) => boolean,
  ) {
    const erased = await db.transaction((tx) => tx.repos.learners.erase(learner, visible))
    if (!erased) throw appError('USER_NOT_FOUND')
    // Who erased (the key id) and how much; never the learner's key or anything about them.
    request.log.info({ key_id: request.apiKeyId, erased }, 'learner erased')
    return { deleted: true as const, erased }
  }

  return {
    exportUser: (request, reply) => sendExport(reply, request.params),
    eraseUser: (request) => erase(request, request.params),
    exportUserByClientUuid: (request, reply) =>
      sendExport(reply, { client_uuid: request.params.client_uuid }, reachable(request)),
    eraseUserByClientUuid: (request) => erase(request, { client_uuid: request.params.client_uuid }, reachable(request)),
    async getUserByClientUuid(request) {
      const user = await db.repos.users.findById(request.params.client_uuid)
      if (!user || !reachable(request)(user)) throw appError('USER_NOT_FOUND')
      return user
    },
  }
}

/**
 * A reader that takes nothing for `ms` (its socket accepts no byte: it stopped reading) has its
 * connection closed, which ends the export and gives its database connection back. The socket's
 * own inactivity timeout is restored for what the connection carries next.
 */
function cutStalledReader(reply: FastifyReply, ms: number) {
  const socket = reply.raw.socket
  // An injected request (tests) has no real socket to time.
  if (!socket || typeof socket.setTimeout !== 'function') return
  const previous = socket.timeout ?? 0
  const cut = () => socket.destroy()
  socket.setTimeout(ms)
  socket.on('timeout', cut)
  reply.raw.once('close', () => {
    socket.off('timeout', cut)
    if (!socket.destroyed) socket.setTimeout(previous)
  })
}

// Idempotency: the one entry point handlers call. A handler passes its request, its reply and
// its work; the caller's key id, the scope (derived from the operation and its path parameters)
// and the Idempotency-Key all come from the request, so no handler names a scope. Presence and
// format of Idempotency-Key were checked before the handler (the request pipeline).
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Repositories } from '../repositories/index.js'
import type { User, UserKey } from '../repositories/users.js'
import type { ReservingDatabase } from '../db/transaction.js'
import { appError } from '../errors.js'
import { createIdempotentWrite, type WriteResult, type WriteWork } from './idempotent-write.js'
import { idempotencyKeyError } from './key.js'
import { idempotencyScope } from './scope.js'

export type { WriteResult }

/**
 * Runs the request's write exactly once per (key id, scope, Idempotency-Key) and sends the
 * answer; resolves to the JSON text to send. The answer is serialized by the route's own
 * response serializer and stored as that text, so the first answer and every replay are the
 * same bytes; a replay carries `Idempotent-Replayed: true` and the echoed `Idempotency-Key`.
 *
 * A write on a learner's behalf names the learner (`{ learner: { system_uuid, system_user_id } }`)
 * and its work receives the stored user: read in the same statement as the stored answer, it
 * costs no statement of its own; no such user is 404 USER_NOT_FOUND (after a replay or 409).
 */
export interface AnswerIdempotently {
  <T>(request: FastifyRequest, reply: FastifyReply, work: (repos: Repositories) => Promise<WriteResult<T>>): Promise<string>
  <T>(
    request: FastifyRequest,
    reply: FastifyReply,
    forLearner: { learner: UserKey },
    work: (repos: Repositories, learner: User) => Promise<WriteResult<T>>,
  ): Promise<string>
}

export function createIdempotency(db: ReservingDatabase & { repos: Repositories }, ttlHours: number): AnswerIdempotently {
  const idempotentWrite = createIdempotentWrite(db, ttlHours)
  return async function answerIdempotently<T>(
    request: FastifyRequest,
    reply: FastifyReply,
    workOrLearner: ((repos: Repositories) => Promise<WriteResult<T>>) | { learner: UserKey },
    learnerWork?: (repos: Repositories, learner: User) => Promise<WriteResult<T>>,
  ): Promise<string> {
    const apiKey = request.apiKey
    // Both were checked before the handler; this guards a route wired without those checks.
    if (!apiKey) throw appError('SECURITY_AUTH_REQUIRED')
    const keyError = idempotencyKeyError(request.headers['idempotency-key'])
    if (keyError) throw keyError
    const key = request.headers['idempotency-key'] as string
    const operationId = (request.routeOptions.schema as { operationId: string }).operationId
    const who = {
      keyId: apiKey.id,
      legacyRecords: apiKey.legacy,
      scope: idempotencyScope(operationId, request.params as Record<string, string>),
      key,
    }
    const serialize = (status: number, body: unknown) =>
      reply.serializeInput(body as Record<string, unknown>, String(status), 'application/json') as string
    const outcome =
      typeof workOrLearner === 'function'
        ? await idempotentWrite(who, request.body, serialize, workOrLearner)
        : await idempotentWrite(who, request.body, serialize, learnerWork as WriteWork<T>, workOrLearner.learner)
    // Already JSON text with its content type: Fastify sends it as it is.
    reply.code(outcome.status).type('application/json; charset=utf-8')
    if (outcome.replayed) reply.header('idempotent-replayed', 'true').header('idempotency-key', key)
    return outcome.json
  }
}

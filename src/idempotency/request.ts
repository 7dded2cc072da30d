// What an idempotent write takes of its request: the record's key (the caller's key id, the
// scope derived from the operation and its path, the Idempotency-Key), the body's hash, and the
// route's serializer, which makes the JSON text that is sent and stored.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { appError } from '../errors.js'
import { IDEMPOTENCY_KEY_HEADER, idempotencyKeyError } from './key.js'
import type { RecordKey } from './records.js'
import { requestHash } from './request-hash.js'
import { idempotencyScope } from './scope.js'

export interface IdempotentRequest extends RecordKey {
  /** SHA-256 of the body's canonical JSON: a key reused with another body is refused (409). */
  hash: string
  /** The JSON text of an answer with this status, by the route's response schema. */
  serialize(status: number, body: unknown): string
}

export function idempotentRequest(request: FastifyRequest, reply: FastifyReply): IdempotentRequest {
  // The key's presence and format were checked before the handler; this guards a route wired without.
  const key = request.headers[IDEMPOTENCY_KEY_HEADER]
  const keyError = idempotencyKeyError(key)
  if (keyError) throw keyError
  if (!request.apiKey) throw appError('SECURITY_AUTH_REQUIRED')
  const operationId = (request.routeOptions.schema as { operationId: string }).operationId
  return {
    keyId: request.apiKey.id,
    scope: idempotencyScope(operationId, request.params as Record<string, string>),
    key: key as string,
    hash: requestHash(request.body),
    serialize: (status, body) => reply.serializeInput(body as Record<string, unknown>, String(status)) as string,
  }
}

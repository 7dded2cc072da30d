// createApiKey, listApiKeys, getApiKey, rollApiKey, revokeApiKey, listAdminAudit: partner keys
// as data. A change commits with its audit row and its notification to every replica; this
// replica re-reads the key before it answers, so the caller can use the answer at once here.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { grantOf, type KeyDefaults, reachOf } from '../src/auth/authority.js'
import { KEY_ID } from '../src/auth/key-file.js'
import { issueSecret } from '../src/auth/secret.js'
import { appError } from '../src/errors.js'
import { sendAnswer } from '../src/http/send-answer.js'
import { idempotentRequest } from '../src/idempotency/request.js'
import { decodeCursor, decodeIdCursor, encodeCursor, encodeIdCursor } from '../src/pagination/cursor.js'
import { clientRequestIdOf, serverRequestIdOf } from '../src/http/request-id.js'
import type { Actor } from '../src/repositories/api-keys.js'
import { invalidQueryParameter } from '../src/validation/request-validation-error.js'
import type { HandlerDeps, ServiceHandlers } from './types.js'

type AdminKeyOperations =
  | 'createApiKey'
  | 'listApiKeys'
  | 'getApiKey'
  | 'rollApiKey'
  | 'revokeApiKey'
  | 'listAdminAudit'

/** The roll's default overlap: a day for every holder of the old secret to move. */
const DEFAULT_OVERLAP_SECONDS = 86_400

/** The audit's actor: the key, the server's own request id and the client's X-Request-Id beside it. */
const actorOf = (request: FastifyRequest): Actor => ({
  keyId: request.apiKeyId!,
  requestId: serverRequestIdOf(request),
  clientRequestId: clientRequestIdOf(request),
})

/** An admin action's log line: the acting key and the request ids the audit row holds. */
const auditLog = (request: FastifyRequest, fields: Record<string, unknown>) => ({
  key_id: request.apiKeyId,
  server_request_id: serverRequestIdOf(request),
  ...fields,
})

/** An answer that carries a secret is kept by no cache (set on every answer of create and roll). */
const noStore = (reply: FastifyReply) => reply.header('cache-control', 'no-store')

export function createAdminKeyHandlers({
  db,
  apiKeys,
  config,
  writes,
}: HandlerDeps): ServiceHandlers<AdminKeyOperations> {
  const defaults: KeyDefaults = {
    rate: { max: config.rateLimitMax, windowMs: config.rateLimitWindowMs },
    maxConcurrentRequests: config.client.maxConcurrentRequests,
    maxBodyBytesInFlight: config.client.maxBodyBytesInFlight,
  }
  // Every operation sees and acts on the keys within the caller's reach; the others are absent (404).
  const reach = (request: FastifyRequest) => reachOf(request.apiKey!, defaults)
  return {
    async createApiKey(request, reply) {
      noStore(reply)
      const body = request.body
      const creator = request.apiKey!
      const issued = issueSecret()
      // src/repositories/api-keys.ts: the key, its secret, audit row and answer in one transaction.
      const answer = await writes.apiKeys.create(
        idempotentRequest(request, reply),
        () => {
          if (apiKeys.registry.isConfiguredId(body.id)) throw appError('ADMIN_KEY_ID_TAKEN')
          const bytes = body.max_body_bytes_in_flight
          if (bytes !== undefined && (bytes < config.bodyLimitBytes || bytes > config.client.maxBodyBytesInFlightShare))
            throw appError('ADMIN_KEY_BODY_BUDGET_OUT_OF_RANGE')
          const grant = grantOf(creator, body, defaults)
          return { id: body.id, partner: creator.partner, prefix: issued.prefix, digest: issued.digest, ...grant }
        },
        issued.secret,
        actorOf(request),
        creator.stored ? creator.id : null,
      )
      await apiKeys.sync.changed(body.id)
      request.log.info(auditLog(request, { created: body.id }), 'API key created')
      return sendAnswer(reply, answer)
    },

    async listApiKeys(request) {
      const { limit, cursor } = request.query
      const after = cursor === undefined ? undefined : decodeCursor(cursor, (id) => KEY_ID.test(id))
      if (after === null) throw invalidQueryParameter('cursor', cursor, 'is not a cursor this service issued')
      const page = await db.repos.apiKeys.page({ after, limit: limit ?? 20, reach: reach(request) })
      return { items: page.items, next_cursor: page.next ? encodeCursor(page.next) : null }
    },

    async getApiKey(request) {
      const key = await db.repos.apiKeys.get(request.params.key_id, reach(request))
      if (!key) throw appError('ADMIN_KEY_NOT_FOUND')
      return key
    },

    async rollApiKey(request, reply) {
      noStore(reply)
      const { key_id } = request.params
      const issued = issueSecret()
      const overlap = request.body.expires_in_seconds ?? DEFAULT_OVERLAP_SECONDS
      const { answer, keyId: rolled } = await writes.apiKeys.roll(
        idempotentRequest(request, reply),
        key_id,
        issued,
        overlap,
        actorOf(request),
        reach(request),
      )
      await apiKeys.sync.changed(rolled)
      request.log.info(auditLog(request, { rolled }), 'API key rolled')
      return sendAnswer(reply, answer)
    },

    // No Idempotency-Key: revoking twice is revoking once; the second answer is the same key.
    async revokeApiKey(request) {
      const { key_id } = request.params
      const done = await db.transaction(({ repos }) => repos.apiKeys.revoke(key_id, actorOf(request), reach(request)))
      if (!done) throw appError('ADMIN_KEY_NOT_FOUND')
      // This replica re-reads them before it answers; the others on their notifications.
      await Promise.all([...new Set([done.key.id, ...done.revoked])].map((id) => apiKeys.sync.changed(id)))
      request.log.info(auditLog(request, { revoked: done.key.id, with_it: done.revoked.length }), 'API key revoked')
      return done.key
    },

    async listAdminAudit(request) {
      const { key_id, limit, cursor } = request.query
      const before = cursor === undefined ? undefined : decodeIdCursor(cursor)
      if (before === null) throw invalidQueryParameter('cursor', cursor, 'is not a cursor this service issued')
      const page = await db.repos.apiKeys.auditPage({
        keyId: key_id,
        before,
        limit: limit ?? 20,
        reach: reach(request),
      })
      return { items: page.items, next_cursor: page.next === null ? null : encodeIdCursor(page.next) }
    },
  }
}

// createApiKey, listApiKeys, getApiKey, rollApiKey, revokeApiKey, listAdminAudit: partner keys
// as data. A change commits with its audit row and its notification to every replica; this
// replica re-reads the key before it answers, so the caller can use the answer at once here.
import type { FastifyRequest } from 'fastify'
import type { ApiKeyIdentity } from '../src/auth/api-keys.js'
import { EXPLICIT_ONLY_SCOPES, KEY_ID, KNOWN_SCOPES } from '../src/auth/key-file.js'
import { issueSecret } from '../src/auth/secret.js'
import { appError } from '../src/errors.js'
import { decodeCursor, decodeIdCursor, encodeCursor, encodeIdCursor } from '../src/pagination/cursor.js'
import type { Actor } from '../src/repositories/api-keys.js'
import { invalidQueryParameter } from '../src/validation/request-validation-error.js'
import type { HandlerDeps, RequestBody, ServiceHandlers } from './types.js'

type AdminKeyOperations =
  | 'createApiKey'
  | 'listApiKeys'
  | 'getApiKey'
  | 'rollApiKey'
  | 'revokeApiKey'
  | 'listAdminAudit'

/** The roll's default overlap: a day for every holder of the old secret to move. */
const DEFAULT_OVERLAP_SECONDS = 86_400

/**
 * What a new key grants: what was asked for, or by default what its creator holds but the
 * explicit-only scopes; never a scope or a system its creator lacks (403 KEYS_403).
 */
export function grantOf(creator: ApiKeyIdentity, body: RequestBody<'createApiKey'>) {
  const held = creator.scopes ?? KNOWN_SCOPES
  const scopes = body.scopes ?? [...held].filter((scope) => !EXPLICIT_ONLY_SCOPES.has(scope))
  if (!scopes.every((scope) => held.has(scope))) throw appError('ADMIN_KEY_GRANT_NOT_HELD')
  const asked = body.systems?.map((system) => system.toLowerCase())
  if (asked && creator.systems && !asked.every((system) => creator.systems!.has(system)))
    throw appError('ADMIN_KEY_GRANT_NOT_HELD')
  const systems = asked ?? (creator.systems && [...creator.systems])
  return { scopes: [...new Set(scopes)].sort(), systems: systems && [...new Set(systems)].sort() }
}

const actorOf = (request: FastifyRequest): Actor => ({ keyId: request.apiKeyId!, requestId: request.id })

export function createAdminKeyHandlers({
  db,
  apiKeys,
  config,
  answerIdempotently,
}: HandlerDeps): ServiceHandlers<AdminKeyOperations> {
  return {
    async createApiKey(request, reply) {
      const body = request.body
      const issued = issueSecret()
      const json = await answerIdempotently(request, reply, async ({ repos }) => {
        if (apiKeys.registry.isConfiguredId(body.id)) throw appError('ADMIN_KEY_ID_TAKEN')
        const grant = grantOf(request.apiKey!, body)
        const bytes = body.max_body_bytes_in_flight
        if (bytes !== undefined && (bytes < config.bodyLimitBytes || bytes > config.client.maxBodyBytesInFlightShare))
          throw appError('ADMIN_KEY_BODY_BUDGET_OUT_OF_RANGE')
        const key = await repos.apiKeys.create(
          {
            id: body.id,
            prefix: issued.prefix,
            digest: issued.digest,
            ...grant,
            rateLimit: body.rate_limit ?? null,
            maxConcurrentRequests: body.max_concurrent_requests ?? null,
            maxBodyBytesInFlight: bytes ?? null,
            expiresAt: body.expires_at ?? null,
          },
          actorOf(request),
        )
        if (!key) throw appError('ADMIN_KEY_ID_TAKEN')
        return { status: 201, body: key, shownOnce: { secret: issued.secret } }
      })
      await apiKeys.sync.changed(body.id)
      request.log.info({ key_id: request.apiKeyId, created: body.id }, 'API key created')
      return json
    },

    async listApiKeys(request) {
      const { limit, cursor } = request.query
      const after = cursor === undefined ? undefined : decodeCursor(cursor, (id) => KEY_ID.test(id))
      if (after === null) throw invalidQueryParameter('cursor', cursor, 'is not a cursor this service issued')
      const page = await db.repos.apiKeys.page({ after, limit: limit ?? 20 })
      return { items: page.items, next_cursor: page.next ? encodeCursor(page.next) : null }
    },

    async getApiKey(request) {
      const key = await db.repos.apiKeys.get(request.params.key_id)
      if (!key) throw appError('ADMIN_KEY_NOT_FOUND')
      return key
    },

    async rollApiKey(request, reply) {
      const { key_id } = request.params
      const issued = issueSecret()
      const overlap = request.body.expires_in_seconds ?? DEFAULT_OVERLAP_SECONDS
      const json = await answerIdempotently(request, reply, async ({ repos }) => {
        const key = await repos.apiKeys.roll(key_id, issued, overlap, actorOf(request))
        if (key === 'missing') throw appError('ADMIN_KEY_NOT_FOUND')
        if (key === 'revoked') throw appError('ADMIN_KEY_REVOKED')
        return { status: 200, body: key, shownOnce: { secret: issued.secret } }
      })
      await apiKeys.sync.changed(key_id)
      request.log.info({ key_id: request.apiKeyId, rolled: key_id }, 'API key rolled')
      return json
    },

    // No Idempotency-Key: revoking twice is revoking once; the second answer is the same key.
    async revokeApiKey(request) {
      const { key_id } = request.params
      const key = await db.transaction(({ repos }) => repos.apiKeys.revoke(key_id, actorOf(request)))
      if (!key) throw appError('ADMIN_KEY_NOT_FOUND')
      await apiKeys.sync.changed(key_id)
      request.log.info({ key_id: request.apiKeyId, revoked: key_id }, 'API key revoked')
      return key
    },

    async listAdminAudit(request) {
      const { key_id, limit, cursor } = request.query
      const before = cursor === undefined ? undefined : decodeIdCursor(cursor)
      if (before === null) throw invalidQueryParameter('cursor', cursor, 'is not a cursor this service issued')
      const page = await db.repos.apiKeys.auditPage({ keyId: key_id, before, limit: limit ?? 20 })
      return { items: page.items, next_cursor: page.next === null ? null : encodeIdCursor(page.next) }
    },
  }
}

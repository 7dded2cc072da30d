import fp from 'fastify-plugin'
import type { onRequestHookHandler } from 'fastify'
import { operations } from '../../generated/operations.js'
import { type ApiKeyIdentity, createApiKeyRegistry } from '../auth/api-keys.js'
import { requireScope } from '../auth/scope.js'
import { checkSystems } from '../auth/systems.js'
import { requireIdempotencyKey, withoutIdempotencyKeyHeader } from '../idempotency/require-key.js'
import { appError } from '../errors.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The identity of the request's API key (id, scopes, systems, rate limit), or null; computed once. */
    readonly apiKey: ApiKeyIdentity | null
    /** The id of the request's API key (never the secret), or null. */
    readonly apiKeyId: string | null
  }
}

const byOperationId = new Map(Object.entries(operations))
const IDENTIFIED = Symbol('apiKey')

/**
 * Every /api/v1 route needs a configured, unexpired X-API-Key unless the spec marks the
 * operation `security: []`. Per operation, in the contract's order:
 * onRequest (before the body is read): key (401), then the operation's scope (403);
 * preHandler (after validation): the key's systems (403), then Idempotency-Key (400).
 */
export default fp(
  async (fastify) => {
    const registry = createApiKeyRegistry(fastify.config.apiKeys, fastify.config.apiKeyEntries)
    fastify.decorateRequest('apiKey', {
      getter() {
        const memo = this as unknown as Record<symbol, ApiKeyIdentity | null>
        if (!(IDENTIFIED in memo)) memo[IDENTIFIED] = registry.identify(this.headers['x-api-key'])
        return memo[IDENTIFIED]!
      },
    })
    fastify.decorateRequest('apiKeyId', {
      getter() {
        return this.apiKey?.id ?? null
      },
    })
    // A callback hook: no promise per request.
    const requireKey: onRequestHookHandler = (request, _reply, done) => {
      done(request.apiKey === null ? appError('SECURITY_AUTH_REQUIRED') : undefined)
    }
    fastify.addHook('onRoute', (route) => {
      const operationId = (route.schema as { operationId?: string } | undefined)?.operationId
      const op = operationId ? byOperationId.get(operationId) : undefined
      if (!route.url.startsWith('/api/v1') || op?.public) return
      if (!op) {
        route.onRequest = [...[route.onRequest ?? []].flat(), requireKey]
        return
      }
      route.onRequest = [...[route.onRequest ?? []].flat(), requireKey, requireScope(op.scopes)]
      const preHandlers = []
      if (op.systemUuidIn.length > 0) preHandlers.push(checkSystems(op.systemUuidIn))
      if (op.idempotent) {
        preHandlers.push(requireIdempotencyKey)
        if (route.schema?.headers) route.schema = { ...route.schema, headers: withoutIdempotencyKeyHeader(route.schema.headers) }
      }
      if (preHandlers.length > 0) route.preHandler = [...preHandlers, ...[route.preHandler ?? []].flat()]
    })
  },
  { name: 'auth', dependencies: ['config'] },
)

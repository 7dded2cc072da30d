import fp from 'fastify-plugin'
import type { onRequestHookHandler } from 'fastify'
import { operations } from '../../generated/operations.js'
import { createApiKeyVerifier } from '../auth/api-keys.js'
import { appError } from '../errors.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Id of the API key the request carries (`key-1`, ...), or null; computed once. */
    readonly apiKeyId: string | null
  }
}

const PUBLIC_OPERATIONS = new Set(Object.entries(operations).filter(([, op]) => op.public).map(([id]) => id))
const VERIFIED = Symbol('apiKeyId')

/**
 * Every /api/v1 route needs a configured X-API-Key unless the spec marks the operation
 * `security: []`. The check runs at onRequest, before the body is read or validated.
 */
export default fp(
  async (fastify) => {
    const verifier = createApiKeyVerifier(fastify.config.apiKeys)
    fastify.decorateRequest('apiKeyId', {
      getter() {
        const memo = this as unknown as Record<symbol, string | null>
        if (!(VERIFIED in memo)) memo[VERIFIED] = verifier.identify(this.headers['x-api-key'])
        return memo[VERIFIED]!
      },
    })
    // A callback hook: no promise per request.
    const requireKey: onRequestHookHandler = (request, _reply, done) => {
      done(request.apiKeyId === null ? appError('SECURITY_AUTH_REQUIRED') : undefined)
    }
    fastify.addHook('onRoute', (route) => {
      const operationId = (route.schema as { operationId?: string } | undefined)?.operationId
      if (!route.url.startsWith('/api/v1') || (operationId && PUBLIC_OPERATIONS.has(operationId))) return
      route.onRequest = [...[route.onRequest ?? []].flat(), requireKey]
    })
  },
  { name: 'auth', dependencies: ['config'] },
)

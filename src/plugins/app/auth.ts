import fp from 'fastify-plugin'
import { type ApiKeyIdentity, createApiKeyRegistry } from '../../auth/api-keys.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The identity of the request's API key (id, scopes, systems, rate limit), or null; computed once. */
    readonly apiKey: ApiKeyIdentity | null
    /** The id of the request's API key (never the secret), or null. */
    readonly apiKeyId: string | null
  }
}

const IDENTIFIED = Symbol('apiKey')

/**
 * Who is calling: `request.apiKey` is the identity of the configured, unexpired X-API-Key a
 * request carries (or null), from API_KEYS and API_KEYS_FILE. Which operations require one,
 * which scope and which systems, and when, is the request pipeline's decision.
 */
export default fp(
  async (fastify) => {
    const registry = createApiKeyRegistry(fastify.config.apiKeys, fastify.config.apiKeyEntries)
    // Declared up front (undefined: not identified yet), so that every request has it from the start.
    fastify.decorateRequest(IDENTIFIED as unknown as string, undefined)
    fastify.decorateRequest('apiKey', {
      getter() {
        const memo = this as unknown as Record<symbol, ApiKeyIdentity | null | undefined>
        if (memo[IDENTIFIED] === undefined) memo[IDENTIFIED] = registry.identify(this.headers['x-api-key'])
        return memo[IDENTIFIED]
      },
    })
    fastify.decorateRequest('apiKeyId', {
      getter() {
        return this.apiKey?.id ?? null
      },
    })
  },
  { name: 'auth', dependencies: ['config'] },
)

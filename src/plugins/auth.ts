import fp from 'fastify-plugin'
import { createApiKeyVerifier } from '../auth/api-keys.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Id of the API key the request carries (`key-1`, ...), or null; computed once. */
    readonly apiKeyId: string | null
  }
}

const VERIFIED = Symbol('apiKeyId')

/**
 * Who is calling: `request.apiKeyId` identifies the configured X-API-Key a request carries
 * (or null). Which operations require one, and when, is the request pipeline's decision.
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
  },
  { name: 'auth', dependencies: ['config'] },
)

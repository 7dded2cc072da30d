import fp from 'fastify-plugin'
import { type ApiKeyIdentity, type ApiKeyRegistry, createApiKeyRegistry } from '../../auth/api-keys.js'
import { type StoredKeySync, startStoredKeySync } from '../../auth/stored-key-sync.js'
import type { Sql } from '../../db/client.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The identity of the request's API key (id, scopes, systems, rate limit), or null; computed once. */
    readonly apiKey: ApiKeyIdentity | null
    /** The id of the request's API key (never the secret), or null. */
    readonly apiKeyId: string | null
  }
  interface FastifyInstance {
    /** The key registry and the sync of its stored keys (the admin operations use both). */
    apiKeys: { registry: ApiKeyRegistry; sync: StoredKeySync }
  }
}

const IDENTIFIED = Symbol('apiKey')

/**
 * Who is calling: `request.apiKey` is the identity of the unexpired X-API-Key a request carries
 * (or null): configured in API_KEYS and API_KEYS_FILE, or stored in the database and kept in
 * step with it (src/auth/stored-key-sync.ts). Which operations require one, which scope and which
 * systems, and when, is the request pipeline's decision.
 */
export default fp<{ listenWith?: Sql }>(
  async (fastify, { listenWith }) => {
    const { config } = fastify
    const registry = createApiKeyRegistry(config.apiKeys, config.apiKeyEntries)
    const sync = await startStoredKeySync({
      registry,
      keys: fastify.db.repos.apiKeys,
      log: fastify.log,
      listenWith,
      bodyBytesRange: { min: config.bodyLimitBytes, max: config.client.maxBodyBytesInFlightShare },
    })
    fastify.addHook('onClose', () => sync.close())
    fastify.decorate('apiKeys', { registry, sync })
    // Declared up front (undefined: not identified yet), so that every request has it from the start.
    fastify.decorateRequest(IDENTIFIED as unknown as string, undefined)
    fastify.decorateRequest('apiKey', {
      getter() {
        const memo = this as unknown as Record<symbol, ApiKeyIdentity | null | undefined>
        if (memo[IDENTIFIED] === undefined) {
          const identity = registry.identify(this.headers['x-api-key'])
          if (identity?.stored) sync.used(identity)
          memo[IDENTIFIED] = identity
        }
        return memo[IDENTIFIED]
      },
    })
    fastify.decorateRequest('apiKeyId', {
      getter() {
        return this.apiKey?.id ?? null
      },
    })
  },
  { name: 'auth', dependencies: ['config', 'database'] },
)

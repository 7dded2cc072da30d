import fp from 'fastify-plugin'
import type { onRequestHookHandler } from 'fastify'
import { type ApiKeyIdentity, type ApiKeyRegistry, createApiKeyRegistry } from '../../auth/api-keys.js'
import { type StoredKeySync, startStoredKeySync } from '../../auth/stored-key-sync.js'
import type { Sql } from '../../db/client.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** The identity of the request's API key (id, scopes, systems, rate limit), or null: set once, on arrival. */
    readonly apiKey: ApiKeyIdentity | null
    /** The id of the request's API key (never the secret), or null. */
    readonly apiKeyId: string | null
  }
  interface FastifyInstance {
    /** The key registry and the sync of its stored keys (the admin operations use both). */
    apiKeys: { registry: ApiKeyRegistry; sync: StoredKeySync }
  }
}

type Identified = { apiKey: ApiKeyIdentity | null; apiKeyId: string | null }

/**
 * Who is calling: an onRequest hook sets `request.apiKey` to the identity of the unexpired
 * X-API-Key a request carries (or null): configured in API_KEYS and API_KEYS_FILE, or stored in
 * the database and kept in step with it (src/auth/stored-key-sync.ts). Every request is
 * identified on arrival, before any check (the rate limiter's client is the key) and before the
 * request log names its key. Which operations require one, which scope and which systems, and
 * when, is the request pipeline's decision.
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
    fastify.decorateRequest('apiKey', null)
    fastify.decorateRequest('apiKeyId', null)
    // A callback hook: no promise per request.
    const identifyKey: onRequestHookHandler = (request, _reply, done) => {
      const identity = registry.identify(request.headers['x-api-key'])
      if (identity !== null) {
        if (identity.stored) sync.used(identity)
        const identified = request as unknown as Identified
        identified.apiKey = identity
        identified.apiKeyId = identity.id
      }
      done()
    }
    fastify.addHook('onRequest', identifyKey)
  },
  { name: 'auth', dependencies: ['config', 'database'] },
)

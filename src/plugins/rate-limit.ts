import fp from 'fastify-plugin'
import rateLimit from '@fastify/rate-limit'
import { appError } from '../errors.js'
import { SlidingWindowStore } from '../rate-limit/sliding-window-store.js'

/**
 * Per-client sliding-window limit on /api/v1 routes (probes, metrics and docs are exempt).
 * The client is the API key when a configured one is sent, else the remote address, so that
 * made-up keys cannot open fresh buckets. Its hook goes first on each route: 429 before 401.
 */
export default fp(
  async (fastify) => {
    await fastify.register(rateLimit, {
      global: false,
      // A key's own rate_limit (API_KEYS_FILE) replaces the default for that key.
      max: (request) => request.apiKey?.rateLimit?.max ?? fastify.config.rateLimitMax,
      timeWindow: (request) => request.apiKey?.rateLimit?.windowMs ?? fastify.config.rateLimitWindowMs,
      store: SlidingWindowStore as never,
      keyGenerator: (request) => request.apiKeyId ?? `ip:${request.ip}`,
      errorResponseBuilder: () => appError('SECURITY_RATE_LIMIT_EXCEEDED'),
    })
    const limit = fastify.rateLimit()
    fastify.addHook('onRoute', (route) => {
      if (!route.url.startsWith('/api/v1')) return
      route.onRequest = [limit, ...[route.onRequest ?? []].flat()]
    })
  },
  { name: 'rate-limit', dependencies: ['config', 'auth'] },
)

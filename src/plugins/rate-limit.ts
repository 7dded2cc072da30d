import fp from 'fastify-plugin'
import rateLimit from '@fastify/rate-limit'
import { appError } from '../errors.js'
import { SlidingWindowStore } from '../rate-limit/sliding-window-store.js'

/**
 * Per-client sliding-window limit. The client is the API key when a configured one is sent,
 * else the remote address, so that made-up keys cannot open fresh buckets. Registered with
 * `global: false`: the request pipeline puts `fastify.rateLimit()` on the operations behind a
 * security requirement (probes, metrics and docs are exempt).
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
  },
  { name: 'rate-limit', dependencies: ['config', 'auth'] },
)

import fp from 'fastify-plugin'
import rateLimit from '@fastify/rate-limit'
import type { FastifyRequest, onRequestHookHandler } from 'fastify'
import { appError } from '../../errors.js'
import { existingStore } from '../../library-types.js'
import { addressClient } from '../../rate-limit/address-client.js'
import { createLimitHook, type RateLimitQuota } from '../../rate-limit/limit-hook.js'
import { createSharedStore } from '../../rate-limit/shared-store.js'
import { SlidingWindowStore } from '../../rate-limit/sliding-window-store.js'
import type { Tracing } from '../../tracing/index.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The rate-limit stage (429) for the request pipeline, adding the IETF fields to every answer it limits. */
    rateLimitHook: onRequestHookHandler
  }
}

interface RateLimitOptions {
  /** Milliseconds for the in-process windows (tests pass their own). */
  windowClock?: () => number
  /** With tracing on, each Redis decision is a span of its request. */
  tracing?: Tracing
}

/**
 * @fastify/rate-limit with an exact sliding window of ours: in process memory, or in Redis
 * (shared by every replica) with REDIS_URL. The client is the API key when a configured one is
 * sent, else the remote address, so that made-up keys cannot open fresh buckets. Registered with
 * `global: false`: the request pipeline puts `fastify.rateLimitHook` (src/rate-limit/limit-hook.ts)
 * on the operations behind a security requirement; probes, metrics and docs are exempt.
 */
export default fp<RateLimitOptions>(
  async (fastify, { windowClock, tracing }) => {
    const { config } = fastify
    const defaults: RateLimitQuota = { max: config.rateLimitMax, windowMs: config.rateLimitWindowMs }
    // A key's own rate_limit (API_KEYS_FILE, or a stored key's) replaces the default for that key.
    const quotaFor = (request: FastifyRequest): RateLimitQuota => request.apiKey?.rateLimit ?? defaults

    // Registered with or without Redis: dashboards and alerts see 0 rather than no series.
    const fallbacks = new fastify.metrics.client.Counter({
      name: 'rate_limit_store_fallback_total',
      help: 'Rate-limit decisions taken in the local window because Redis was unreachable or slow',
    })
    const local = new SlidingWindowStore({ now: windowClock })
    const shared = config.redisUrl
      ? await createSharedStore({
          url: config.redisUrl,
          commandTimeoutMs: config.redisCommandTimeoutMs,
          local,
          fallbacks,
          log: fastify.log,
        })
      : undefined
    if (shared) fastify.addHook('onClose', shared.close)
    const store = shared ? (tracing?.traceRateLimitStore(shared.store) ?? shared.store) : local

    await fastify.register(rateLimit, {
      global: false,
      max: (request) => quotaFor(request).max,
      timeWindow: (request) => quotaFor(request).windowMs,
      store: existingStore(store),
      keyGenerator: (request) => request.apiKeyId ?? addressClient(request),
      errorResponseBuilder: () => appError('SECURITY_RATE_LIMIT_EXCEEDED'),
    })
    fastify.decorate('rateLimitHook', createLimitHook({ limit: fastify.rateLimit(), store, quotaFor, defaults }))
  },
  { name: 'rate-limit', dependencies: ['config', 'auth', 'metrics'] },
)

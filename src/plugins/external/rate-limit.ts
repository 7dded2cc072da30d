import fp from 'fastify-plugin'
import rateLimit, { normalizeIP } from '@fastify/rate-limit'
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify'
import { appError } from '../../errors.js'
import { ADDRESS_PREFIX, SlidingWindowStore } from '../../rate-limit/sliding-window-store.js'
import { createRedisWindowClient, RedisWindowStore } from '../../rate-limit/redis-window.js'
import * as ietf from '../../rate-limit/ietf-headers.js'
import { existingStore } from '../../library-types.js'
import type { ApiKeyIdentity } from '../../auth/api-keys.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The rate-limit check for one operation (429), adding the IETF fields to every answer it limits. */
    rateLimitHook: onRequestHookHandler
  }
}

export interface RateLimitQuota {
  max: number
  windowMs: number
}

/**
 * The rate-limit client of a request without a configured key: its address, as
 * @fastify/rate-limit's own default key would be: an IPv6 address by its /64 (one host's usual
 * share, which it can rotate through freely), an IPv4-mapped one as plain IPv4. Normalising an
 * IPv6 address takes ~10 µs, so it is done once per connection (request.ip is the socket's peer:
 * no trustProxy).
 */
const addressClients = new WeakMap<object, string>()
export function addressClient(request: FastifyRequest): string {
  const socket = request.raw.socket
  let client = addressClients.get(socket)
  if (client === undefined) {
    // A socket closed under the request has no address left; its requests share one window.
    client = `${ADDRESS_PREFIX}${request.ip ? normalizeIP(request.ip) : 'unknown'}`
    addressClients.set(socket, client)
  }
  return client
}

/** A Redis outage is logged at most this often (each fallback decision is counted in the metric). */
const FALLBACK_LOG_EVERY_MS = 10_000

/**
 * Per-client sliding-window limit. The client is the API key when a configured one is sent,
 * else the remote address, so that made-up keys cannot open fresh buckets. Registered with
 * `global: false`: the request pipeline puts `fastify.rateLimit()` on the operations behind a
 * security requirement (probes, metrics and docs are exempt), through `fastify.rateLimitHook`,
 * which adds the IETF RateLimit-Policy and RateLimit fields next to X-RateLimit-*. The windows
 * live in process memory, or in Redis (shared by every replica) with REDIS_URL.
 *
 * A stored key's request counts twice: in its own window, then (once its own accepted it) in
 * its partner's, the window of the partner's root key under the root's quota, which the root's
 * own requests fill too. So keys a partner creates share its rate instead of multiplying it.
 */
export default fp(
  async (
    fastify,
    {
      windowClock,
    }: { /** Milliseconds for the in-process windows (tests pass their own). */ windowClock?: () => number },
  ) => {
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
      ? await sharedStore(fastify, config.redisUrl, config.redisCommandTimeoutMs, local, fallbacks)
      : undefined
    // With tracing on, each Redis decision is a span of its request.
    const store = shared ? (fastify.tracing?.traceRateLimitStore(shared) ?? shared) : local

    await fastify.register(rateLimit, {
      global: false,
      max: (request) => quotaFor(request).max,
      timeWindow: (request) => quotaFor(request).windowMs,
      store: existingStore(store),
      keyGenerator: (request) => request.apiKeyId ?? addressClient(request),
      errorResponseBuilder: () => appError('SECURITY_RATE_LIMIT_EXCEEDED'),
    })
    const limit = fastify.rateLimit()
    const rootQuota = (root: ApiKeyIdentity): RateLimitQuota => root.rateLimit ?? defaults
    /** The partner's window: done() when it accepts, a 429 (with Retry-After) when it is full. */
    const limitPartner = (root: ApiKeyIdentity, done: (err?: Error) => void) => {
      const quota = rootQuota(root)
      store.incr(
        root.id,
        (err, result) => {
          if (err || result.current <= quota.max) return done()
          done(
            appError('SECURITY_RATE_LIMIT_EXCEEDED', {
              'retry-after': String(Math.max(1, Math.ceil(result.ttl / 1000))),
            }),
          )
        },
        quota.windowMs,
        quota.max,
      )
    }
    // The policy field is a pure function of the quota: one text per quota object (the default's
    // or a key's own), made on its first answer and kept with it.
    const policies = new WeakMap<RateLimitQuota, string>()
    const policyOf = (quota: RateLimitQuota) => {
      let policy = policies.get(quota)
      if (policy === undefined) {
        policy = ietf.rateLimitPolicy(quota.max, quota.windowMs)
        policies.set(quota, policy)
      }
      return policy
    }
    const describe = (request: FastifyRequest, reply: FastifyReply) => {
      const remaining = reply.getHeader('x-ratelimit-remaining')
      if (remaining === undefined) return
      reply.header('ratelimit-policy', policyOf(quotaFor(request)))
      reply.header('ratelimit', ietf.rateLimit(Number(remaining), Number(reply.getHeader('x-ratelimit-reset'))))
    }
    // A callback hook around the library's async one: no promise of its own per request.
    const limitHook: onRequestHookHandler = function (request, reply, done) {
      limit.call(this, request, reply).then(
        () => {
          describe(request, reply)
          const root = request.apiKey?.partnerRoot
          if (root) limitPartner(root, done)
          else done()
        },
        (err: Error) => {
          describe(request, reply)
          done(err)
        },
      )
    }
    fastify.decorate('rateLimitHook', limitHook)
  },
  { name: 'rate-limit', dependencies: ['config', 'auth', 'metrics'] },
)

/** The Redis-backed store with its local fallback, fallback metric, throttled log and shutdown. */
async function sharedStore(
  fastify: FastifyInstance,
  url: string,
  commandTimeoutMs: number,
  local: SlidingWindowStore,
  fallbacks: { inc(): void },
) {
  let lastLog = Number.NEGATIVE_INFINITY
  let unlogged = 0
  const redis = await createRedisWindowClient({ url, commandTimeoutMs })
  const store = new RedisWindowStore({
    redis,
    local,
    onFallback: (reason) => {
      fallbacks.inc()
      const now = Date.now()
      if (now - lastLog < FALLBACK_LOG_EVERY_MS) {
        unlogged++
        return
      }
      fastify.log.warn(
        { reason, fallbacks_since_last_log: unlogged },
        'rate limit: Redis unavailable, deciding in the local window',
      )
      lastLog = now
      unlogged = 0
    },
    onRecover: () => fastify.log.info('rate limit: windows shared in Redis'),
  })
  fastify.addHook('onClose', async () => {
    await redis.quit().catch(() => redis.disconnect())
  })
  return store
}

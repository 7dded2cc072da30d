// The rate-limit stage of the request pipeline: @fastify/rate-limit's check for the request's
// own window, then its partner's, with the IETF fields beside X-RateLimit-*.
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify'
import type { ApiKeyIdentity } from '../auth/api-keys.js'
import { appError } from '../errors.js'
import * as ietf from './ietf-headers.js'
import type { IncrCallback } from './sliding-window-store.js'

export interface RateLimitQuota {
  max: number
  windowMs: number
}

/** The library's check (fastify.rateLimit()), bound to the route's instance. */
type LibraryLimit = (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) => Promise<unknown>

interface LimitHookOptions {
  limit: LibraryLimit
  store: { incr(key: string, cb: IncrCallback, timeWindowMs: number, max: number): void }
  /** The request's quota: its key's own, else the default. */
  quotaFor: (request: FastifyRequest) => RateLimitQuota
  defaults: RateLimitQuota
}

/**
 * A stored key's request counts twice: in its own window, then (once its own accepted it) in
 * its partner's, the window of the partner's root key under the root's quota, which the root's
 * own requests fill too. So keys a partner creates share its rate instead of multiplying it.
 */
export function createLimitHook({ limit, store, quotaFor, defaults }: LimitHookOptions): onRequestHookHandler {
  /** The partner's window: done() when it accepts, a 429 (with Retry-After) when it is full. */
  const limitPartner = (root: ApiKeyIdentity, done: (err?: Error) => void) => {
    const quota = root.rateLimit ?? defaults
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
  // A callback hook around the library's async one: no promise of its own per request. Named:
  // the order-of-checks test reads hooks by name.
  return function limitHook(request, reply, done) {
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
}

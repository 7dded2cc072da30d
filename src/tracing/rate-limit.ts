// A span per rate-limit decision (the Redis round trip, or the local window it falls back to),
// as a child of the request's span. The decision is timed from the request's point of view:
// decisions of several requests share one Redis call (src/rate-limit/redis-window.ts).
import { SpanKind, type Tracer } from '@opentelemetry/api'
import type { IncrCallback } from '../rate-limit/sliding-window-store.js'
import { sampledRequest } from './sampled-request.js'

export interface DecisionStore {
  incr(key: string, cb: IncrCallback, timeWindow: number, max: number): void
  child(...args: unknown[]): unknown
  /** True while decisions go to Redis (SharedWindowStore). */
  readonly shared?: boolean
}

export function traceRateLimitStore<T extends DecisionStore>(store: T, tracer: Tracer): T {
  const incr = store.incr.bind(store)
  const traced = Object.create(store) as T
  traced.incr = (key, cb, timeWindow, max) => {
    const parent = sampledRequest.getStore()
    if (!parent) return incr(key, cb, timeWindow, max)
    // No key in the span: it is an API key id or a client address.
    const span = tracer.startSpan(
      'ratelimit decide',
      { kind: SpanKind.CLIENT, attributes: { 'db.system.name': 'redis', 'ratelimit.shared': store.shared === true } },
      parent,
    )
    incr(
      key,
      (err, res) => {
        span.setAttribute('ratelimit.allowed', !err && res.current <= max)
        span.end()
        cb(err, res)
      },
      timeWindow,
      max,
    )
  }
  traced.child = () => traced
  return traced
}

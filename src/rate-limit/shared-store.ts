// The Redis-backed windows (several replicas) with their local fallback, its metric and its
// throttled log.
import type { FastifyBaseLogger } from 'fastify'
import { createRedisWindowClient, RedisWindowStore } from './redis-window.js'
import type { SlidingWindowStore } from './sliding-window-store.js'

/** A Redis outage is logged at most this often (each fallback decision is counted in the metric). */
const FALLBACK_LOG_EVERY_MS = 10_000

interface SharedStoreOptions {
  url: string
  commandTimeoutMs: number
  local: SlidingWindowStore
  fallbacks: { inc(): void }
  log: FastifyBaseLogger
}

export async function createSharedStore({ url, commandTimeoutMs, local, fallbacks, log }: SharedStoreOptions) {
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
      log.warn(
        { reason, fallbacks_since_last_log: unlogged },
        'rate limit: Redis unavailable, deciding in the local window',
      )
      lastLog = now
      unlogged = 0
    },
    onRecover: () => log.info('rate limit: windows shared in Redis'),
  })
  const close = async () => {
    await redis.quit().catch(() => redis.disconnect())
  }
  return { store, close }
}

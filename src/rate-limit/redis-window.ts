// The store used with REDIS_URL: every replica shares the sliding windows in Redis. One decision
// is one atomic script call (EVALSHA through ioredis' defineCommand; EVAL the first time) on a
// sorted set per client holding the accepted requests' timestamps, judged by Redis' own clock
// (TIME), so every replica judges the same window and no read-then-write race exists.
//
// When Redis is down, not connected yet, or slower than the command timeout, the decision is
// taken in this process' own sliding window instead (it may start empty; its counts are never
// copied into Redis): a request never fails and never waits longer than the timeout, and only
// the one that met the failure waits at all. While Redis is out, a decision at most once a second
// also sends a PING (without waiting for it); its answer, or a reconnection, puts Redis back.
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import type { IncrCallback, SlidingWindowStore, StoreResult } from './sliding-window-store.js'

// KEYS[1]: the client's set; ARGV: window ms, max, a member unique to this request. Scores are
// microseconds (exact in a double until the year 2255). Accepted iff fewer than max accepted
// requests are in (now - window, now]; rejected ones are not recorded. Returns the live count
// before this request and the ttl in ms until the oldest accepted request leaves the window.
const SLIDING_WINDOW_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1]) * 1000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local live = redis.call('ZCARD', KEYS[1])
if live < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local ttl = 0
if oldest[2] then ttl = math.ceil((tonumber(oldest[2]) + window - now) / 1000) end
return {live, ttl}
`

export type RedisWindowClient = Redis & {
  slidingWindow(key: string, windowMs: number, max: number, member: string): Promise<[number, number]>
}

/**
 * An ioredis client that never queues or waits: no offline queue (a command while disconnected
 * fails at once), a short command timeout, and reconnection in the background at most 1 s apart.
 */
export function createRedisWindowClient({
  url,
  commandTimeoutMs,
}: {
  url: string
  commandTimeoutMs: number
}): RedisWindowClient {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    commandTimeout: commandTimeoutMs,
    connectTimeout: 1000,
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
    // A failover shows up as errors, hence fallback; no reconnect on READONLY and the like.
    reconnectOnError: () => false,
  })
  client.defineCommand('slidingWindow', { numberOfKeys: 1, lua: SLIDING_WINDOW_LUA })
  return client as RedisWindowClient
}

/** Redis key of a rate-limit client (`ip:...` or a key id). */
export const redisKey = (client: string) => `ratelimit:${client}`

/** One decision in Redis for `client`: @fastify/rate-limit's `current` (max + 1 when refused) and ttl. */
export async function takeInRedis(
  redis: RedisWindowClient,
  client: string,
  windowMs: number,
  max: number,
  member: string = randomUUID(),
): Promise<StoreResult> {
  const [live, ttl] = await redis.slidingWindow(redisKey(client), windowMs, max, member)
  return { current: live < max ? live + 1 : max + 1, ttl }
}

export interface RedisWindowOptions {
  redis: RedisWindowClient
  local: SlidingWindowStore
  /** Called for every decision taken locally while Redis is configured. */
  onFallback: (reason: string) => void
  /** Called when Redis answers again after a fallback. */
  onRecover?: () => void
}

/** How often, at most, a decision taken locally also sends Redis a PING. */
const PROBE_EVERY_MS = 1000

export class RedisWindowStore {
  readonly #redis: RedisWindowClient
  readonly #local: SlidingWindowStore
  readonly #onFallback: (reason: string) => void
  readonly #onRecover: () => void
  // Members unique across replicas: this store's tag and a count.
  readonly #tag = randomUUID()
  #sequence = 0
  /** Why decisions are local; null while they go to Redis. */
  #down: string | null = 'Redis not connected yet'
  #nextProbe = 0

  constructor(options: RedisWindowOptions) {
    this.#redis = options.redis
    this.#local = options.local
    this.#onFallback = options.onFallback
    this.#onRecover = options.onRecover ?? (() => {})
    this.#redis.on('ready', () => this.#up())
    // Errors surface through commands; without a listener ioredis prints them itself.
    this.#redis.on('error', () => {})
    this.#redis.on('close', () => (this.#down ??= 'Redis connection closed'))
  }

  /** True while decisions go to Redis. */
  get shared(): boolean {
    return this.#down === null
  }

  incr(key: string, cb: IncrCallback, timeWindow: number, max: number): void {
    if (this.#down !== null) {
      cb(null, this.#fallback(key, timeWindow, max))
      return
    }
    takeInRedis(this.#redis, key, timeWindow, max, `${this.#tag}.${this.#sequence++}`).then(
      (result) => cb(null, result),
      (err: Error) => {
        this.#down ??= err.message
        this.#nextProbe = Date.now() + PROBE_EVERY_MS
        cb(null, this.#fallback(key, timeWindow, max))
      },
    )
  }

  child(): RedisWindowStore {
    return this
  }

  #fallback(key: string, timeWindow: number, max: number): StoreResult {
    this.#onFallback(this.#down ?? 'Redis unavailable')
    const now = Date.now()
    if (now >= this.#nextProbe && this.#redis.status === 'ready') {
      this.#nextProbe = now + PROBE_EVERY_MS
      this.#redis.ping().then(
        () => this.#up(),
        () => {},
      )
    }
    return this.#local.take(key, timeWindow, max)
  }

  #up(): void {
    if (this.#down === null) return
    this.#down = null
    this.#onRecover()
  }
}

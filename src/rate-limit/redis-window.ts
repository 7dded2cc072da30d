// The store used with REDIS_URL: every replica shares the sliding windows in Redis. Decisions are
// taken by an atomic script (EVALSHA through ioredis' defineCommand; EVAL the first time) on a
// sorted set per client holding the accepted requests' timestamps, judged by Redis' own clock
// (TIME), so every replica judges the same window and no read-then-write race exists. The
// decisions asked for in one event-loop turn (every request read in it) go in one script call,
// sent when the turn ends (setImmediate: no delay): one command per turn instead of one per
// request, which is what a replica spends on Redis.
//
// When Redis is down, not connected yet, or slower than the command timeout, the decision is
// taken in this process' own sliding window instead (it may start empty; its counts are never
// copied into Redis): a request never fails and never waits longer than the timeout, and only
// the one that met the failure waits at all. While Redis is out, a decision at most once a second
// also sends a PING (without waiting for it); its answer, or a reconnection, puts Redis back.
import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import type { IncrCallback, SlidingWindowStore, StoreResult } from './sliding-window-store.js'

// KEYS[i]: a client's set; ARGV[2i-1], ARGV[2i]: its window ms and max; ARGV[#KEYS*2+i]: a member
// unique to that request. Scores are microseconds (exact in a double until the year 2255).
// Taken in order, each decision is accepted iff fewer than max accepted requests are in
// (now - window, now]; rejected ones are not recorded. Returns, per decision, the live count
// before it and the ttl in ms until the oldest accepted request leaves the window.
const SLIDING_WINDOW_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = #KEYS
local out = {}
for i = 1, n do
  local key = KEYS[i]
  local window = tonumber(ARGV[2 * i - 1]) * 1000
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local live = redis.call('ZCARD', key)
  if live < tonumber(ARGV[2 * i]) then
    redis.call('ZADD', key, now, ARGV[2 * n + i])
    redis.call('PEXPIRE', key, ARGV[2 * i - 1])
  end
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  local ttl = 0
  if oldest[2] then ttl = math.ceil((tonumber(oldest[2]) + window - now) / 1000) end
  out[2 * i - 1] = live
  out[2 * i] = ttl
end
return out
`

/** One decision to take: the client, its window and max, and a member unique to the request. */
export interface Decision {
  client: string
  windowMs: number
  max: number
  member: string
}

export type RedisWindowClient = Redis & {
  slidingWindows(keyCount: number, ...keysThenArgs: (string | number)[]): Promise<number[]>
}

/**
 * An ioredis client that never queues or waits: no offline queue (a command while disconnected
 * fails at once), a short command timeout, and reconnection in the background at most 1 s apart.
 * ioredis is loaded here, only when REDIS_URL is set: a replica without Redis never pays for it.
 */
export async function createRedisWindowClient({
  url,
  commandTimeoutMs,
}: {
  url: string
  commandTimeoutMs: number
}): Promise<RedisWindowClient> {
  const { Redis } = await import('ioredis')
  const client = new Redis(url, {
    enableOfflineQueue: false,
    commandTimeout: commandTimeoutMs,
    connectTimeout: 1000,
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
    // A failover shows up as errors, hence fallback; no reconnect on READONLY and the like.
    reconnectOnError: () => false,
  })
  client.defineCommand('slidingWindows', { lua: SLIDING_WINDOW_LUA })
  return client as RedisWindowClient
}

/** Redis key of a rate-limit client (`ip:...` or a key id). */
export const redisKey = (client: string) => `ratelimit:${client}`

/** Decisions in Redis, in order, in one script call: @fastify/rate-limit's `current` (max + 1 when refused) and ttl. */
export async function takeInRedis(redis: RedisWindowClient, decisions: readonly Decision[]): Promise<StoreResult[]> {
  const args: (string | number)[] = decisions.map((d) => redisKey(d.client))
  for (const d of decisions) args.push(d.windowMs, d.max)
  for (const d of decisions) args.push(d.member)
  const out = await redis.slidingWindows(decisions.length, ...args)
  return decisions.map((d, i) => {
    const live = out[2 * i]!
    return { current: live < d.max ? live + 1 : d.max + 1, ttl: out[2 * i + 1]! }
  })
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
  /** The decisions asked for in this event-loop turn, sent together when it ends. */
  #turn: (Decision & { cb: IncrCallback })[] = []
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
    const member = `${this.#tag}.${this.#sequence++}`
    if (this.#turn.push({ client: key, windowMs: timeWindow, max, member, cb }) === 1) setImmediate(() => this.#send())
  }

  #send(): void {
    const turn = this.#turn
    this.#turn = []
    takeInRedis(this.#redis, turn).then(
      (results) => {
        for (const [i, d] of turn.entries()) d.cb(null, results[i]!)
      },
      (err: Error) => {
        this.#down ??= err.message
        this.#nextProbe = Date.now() + PROBE_EVERY_MS
        for (const d of turn) d.cb(null, this.#fallback(d.client, d.windowMs, d.max))
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

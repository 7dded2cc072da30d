// The sliding window in Redis: one sorted set per client holding the accepted requests'
// timestamps, decided by one Lua script (one atomic round trip, no read-then-write race
// between replicas). The clock is Redis' own (TIME), so every replica judges the same window.
import { Redis } from 'ioredis'
import type { StoreResult } from './sliding-window-store.js'

// One call decides for each key in KEYS in turn (the decisions of one turn of the event loop, see
// takeInRedis); ARGV holds three values per key: window ms, max, a member suffix unique to that
// request. Scores are microseconds (exact in a double until the year 2255). A request is accepted
// iff fewer than max accepted ones are in (now - window, now]; rejected ones are not recorded.
// Each decision is atomic (a script runs alone); those of one call share one reading of TIME.
// Returns, per key, current and the ttl in ms until the oldest accepted request leaves the window.
// One call touches many clients' keys: fine on one Redis server, not on Redis Cluster (the keys of
// one script call must share a slot there).
const SLIDING_WINDOW_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {}
for i, key in ipairs(KEYS) do
  local window = tonumber(ARGV[3 * i - 2]) * 1000
  local max = tonumber(ARGV[3 * i - 1])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local live = redis.call('ZCARD', key)
  local current = max + 1
  if live < max then
    redis.call('ZADD', key, now, now .. ':' .. ARGV[3 * i])
    redis.call('PEXPIRE', key, ARGV[3 * i - 2])
    current = live + 1
  end
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  local ttl = 0
  if oldest[2] then ttl = math.ceil((tonumber(oldest[2]) + window - now) / 1000) end
  out[2 * i - 1] = current
  out[2 * i] = ttl
end
return out
`

interface WindowCommands {
  /** `slidingWindows(n, ...n keys, ...n times [windowMs, max, member])`: n times [current, ttl] */
  slidingWindows(...args: (string | number)[]): Promise<number[]>
}

export type RedisWindowClient = Redis & WindowCommands

export interface RedisWindowOptions {
  url: string
  /** A command slower than this fails (and the caller falls back). */
  commandTimeoutMs: number
}

/**
 * An ioredis client that never queues or waits: no offline queue (a command while disconnected
 * fails at once), a short command timeout, and reconnection in the background at most 1 s apart.
 */
export function createRedisWindowClient({ url, commandTimeoutMs }: RedisWindowOptions): RedisWindowClient {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    commandTimeout: commandTimeoutMs,
    connectTimeout: 1000,
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
    // Reconnect after READONLY etc. is not wanted; a failover shows up as errors -> fallback.
    reconnectOnError: () => false,
    // Not ioredis' auto-pipelining: its per-command bookkeeping cost the replica more CPU than
    // the writes it saves. takeInRedis sends one command per turn instead.
  })
  // ioredis loads the script once (EVALSHA, EVAL when the server does not know it yet).
  client.defineCommand('slidingWindows', { lua: SLIDING_WINDOW_LUA }) // the key count comes first
  return client as RedisWindowClient
}

/** Redis key of a rate-limit client (`ip:...` or a key id). */
export const redisKey = (client: string) => `ratelimit:${client}`

interface Pending {
  client: string
  windowMs: number
  max: number
  resolve: (result: StoreResult) => void
  reject: (err: Error) => void
}

/** Decisions per script call: bounds how long one call holds Redis. */
const MAX_PER_CALL = 100

/**
 * The decisions asked for in one turn of the event loop, per client, waiting for its end. They
 * leave together as one script call: Redis reads, parses, runs and answers one command for all of
 * them, and ioredis encodes one and parses one reply, instead of one per request. Both costs
 * are per command, not per decision, and Redis' is paid for every replica on its one core.
 * A decision waits at most until the end of the turn it was asked in (the writes of one command
 * each would be held that long too, to leave in one syscall); a failed or timed-out call sends
 * all of its decisions to the caller's fallback.
 */
const thisTurn = new WeakMap<RedisWindowClient, Pending[]>()

let sequence = 0
const processTag = `${process.pid.toString(36)}.${Math.random().toString(36).slice(2, 8)}`

function send(redis: RedisWindowClient): void {
  const pending = thisTurn.get(redis)!
  thisTurn.delete(redis)
  for (let from = 0; from < pending.length; from += MAX_PER_CALL) {
    const part = pending.slice(from, from + MAX_PER_CALL)
    const args: (string | number)[] = [part.length]
    for (const d of part) args.push(redisKey(d.client))
    for (const d of part) {
      sequence = (sequence + 1) % 1e9
      args.push(d.windowMs, d.max, `${processTag}.${sequence}`)
    }
    redis.slidingWindows(...args).then(
      (reply) => {
        for (let i = 0; i < part.length; i++) part[i]!.resolve({ current: reply[2 * i]!, ttl: reply[2 * i + 1]! })
      },
      (err: Error) => {
        for (const d of part) d.reject(err)
      },
    )
  }
}

/** One decision in Redis for `client`, sent with the others of this turn. */
export function takeInRedis(redis: RedisWindowClient, client: string, windowMs: number, max: number): Promise<StoreResult> {
  return new Promise((resolve, reject) => {
    let pending = thisTurn.get(redis)
    if (!pending) {
      pending = []
      thisTurn.set(redis, pending)
      setImmediate(send, redis)
    }
    pending.push({ client, windowMs, max, resolve, reject })
  })
}

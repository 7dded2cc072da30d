// The sliding window in Redis: one sorted set per client holding the accepted requests'
// timestamps, decided by one Lua script (one atomic round trip, no read-then-write race
// between replicas). The clock is Redis' own (TIME), so every replica judges the same window.
import type { Socket } from 'node:net'
import { Redis } from 'ioredis'
import type { StoreResult } from './sliding-window-store.js'

// KEYS[1]: the client's sorted set. ARGV: window ms, max, a member suffix unique to this request.
// Scores are microseconds (exact in a double until the year 2255). A request is accepted iff
// fewer than max accepted ones are in (now - window, now]; rejected ones are not recorded.
// Returns { current, ttl ms until the oldest accepted request leaves the window }.
const SLIDING_WINDOW_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1]) * 1000
local max = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local live = redis.call('ZCARD', KEYS[1])
local current = max + 1
if live < max then
  redis.call('ZADD', KEYS[1], now, now .. ':' .. ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  current = live + 1
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local ttl = 0
if oldest[2] then ttl = math.ceil((tonumber(oldest[2]) + window - now) / 1000) end
return { current, ttl }
`

interface WindowCommands {
  slidingWindow(key: string, windowMs: number, max: number, member: string): Promise<[number, number]>
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
    // the writes it saves. takeInRedis coalesces the writes instead (writeOncePerTurn).
  })
  // ioredis loads the script once (EVALSHA, EVAL when the server does not know it yet).
  client.defineCommand('slidingWindow', { numberOfKeys: 1, lua: SLIDING_WINDOW_LUA })
  return client as RedisWindowClient
}

/** Redis key of a rate-limit client (`ip:...` or a key id). */
export const redisKey = (client: string) => `ratelimit:${client}`

/**
 * Holds the client's socket writes until the end of this turn of the event loop, so that the
 * decisions of every request read in one turn leave in one write (Node's cork/uncork) rather
 * than one syscall each. Cheaper than ioredis' auto-pipelining for the same effect; the
 * command timeout still runs from each command's own start.
 */
const corked = new WeakSet<Socket>()
function writeOncePerTurn(redis: RedisWindowClient): void {
  const stream = (redis as unknown as { stream?: Socket }).stream
  if (!stream || stream.destroyed || corked.has(stream)) return
  corked.add(stream)
  stream.cork()
  setImmediate(() => {
    corked.delete(stream)
    stream.uncork()
  })
}

let sequence = 0
const processTag = `${process.pid.toString(36)}.${Math.random().toString(36).slice(2, 8)}`

/** One decision in Redis for `client`. */
export async function takeInRedis(redis: RedisWindowClient, client: string, windowMs: number, max: number): Promise<StoreResult> {
  sequence = (sequence + 1) % 1e9
  writeOncePerTurn(redis)
  const [current, ttl] = await redis.slidingWindow(redisKey(client), windowMs, max, `${processTag}.${sequence}`)
  return { current, ttl }
}

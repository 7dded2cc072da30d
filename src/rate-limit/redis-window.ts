// The sliding window in Redis: one list per client holding the accepted requests' timestamps,
// oldest first, decided by one Lua script (one atomic round trip, no read-then-write race
// between replicas). The clock is Redis' own (TIME), so every replica judges the same window.
import type { Socket } from 'node:net'
import { Redis } from 'ioredis'
import type { StoreResult } from './sliding-window-store.js'

// KEYS[1]: the client's list. ARGV: window ms, max. Stamps are microseconds (exact in a double).
// A request is accepted iff fewer than max accepted ones are in (now - window, now]; rejected ones
// are not recorded. Returns { current, ttl ms until the oldest accepted request leaves the window }.
//
// Every redis.call costs Redis more than the work it does, and Redis' CPU per decision is what
// bounds all replicas together, so the script makes as few as it can: a list rather than a sorted
// set (no count to ask for: RPUSH answers it; the new stamp is popped again if over the limit),
// and stamps that left the window are read past and trimmed only once 8 of them gathered at the
// head (they are not counted meanwhile). If TIME ever steps back, a stamp out of order is
// dropped late: the window is only stricter for that while, never looser.
const SLIDING_WINDOW_LUA = `
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local stamp = t[1] .. string.format('%06d', tonumber(t[2]))
local window = tonumber(ARGV[1]) * 1000
local max = tonumber(ARGV[2])
local cutoff = now - window
local expired = 0
local oldest
repeat
  local head = redis.call('LRANGE', key, expired, expired + 15)
  for _, s in ipairs(head) do
    local at = tonumber(s)
    if at > cutoff then
      oldest = at
      break
    end
    expired = expired + 1
  end
until oldest or #head < 16
if expired >= 8 then
  redis.call('LTRIM', key, expired, -1)
  expired = 0
end
local current = redis.call('RPUSH', key, stamp) - expired
if current > max then
  redis.call('RPOP', key)
  current = max + 1
else
  redis.call('PEXPIRE', key, ARGV[1])
  if not oldest then oldest = now end
end
local ttl = 0
if oldest then ttl = math.ceil((oldest + window - now) / 1000) end
return { current, ttl }
`

interface WindowCommands {
  slidingWindow(key: string, windowMs: number, max: number): Promise<[number, number]>
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

/**
 * Redis key of a rate-limit client (`ip:...` or a key id). `v2`: the list; the sorted sets of
 * earlier releases (`ratelimit:<client>`) are left to expire, so replicas of both kinds never
 * meet a key of the other type during a rolling upgrade (they count apart for one window).
 */
export const redisKey = (client: string) => `ratelimit:v2:${client}`

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

/** One decision in Redis for `client`. */
export async function takeInRedis(redis: RedisWindowClient, client: string, windowMs: number, max: number): Promise<StoreResult> {
  writeOncePerTurn(redis)
  const [current, ttl] = await redis.slidingWindow(redisKey(client), windowMs, max)
  return { current, ttl }
}

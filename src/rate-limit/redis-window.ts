// The sliding window in Redis: one sorted set per client holding the accepted requests'
// timestamps, decided by one Lua script (one atomic round trip, no read-then-write race
// between replicas). The clock is Redis' own (TIME), so every replica judges the same window.
import { Redis } from 'ioredis'
import type { StoreResult } from './sliding-window-store.js'

// One call decides for each group in turn (a group: the decisions one replica sends together for
// one client with one quota; see decideInRedis). KEYS holds a key per
// group; ARGV four values per group: window ms, max, the number of decisions, and a member prefix
// unique to the group. Scores are microseconds (exact in a double until the year 2255). A request
// is accepted iff fewer than max accepted ones are in (now - window, now]; rejected ones are not
// recorded. The decisions of one call share one reading of TIME, so a group's decisions are the
// same as taking them one by one at that instant: the window expires once, the first
// max - live are accepted (added in one ZADD), the rest rejected, and all share one ttl. Each group
// is atomic (a script runs alone). Returns, per group, the live count before it and the ttl in ms
// until the oldest accepted request leaves the window.
// One call touches many clients' keys: fine on one Redis server, not on Redis Cluster (the keys of
// one script call must share a slot there).
const SLIDING_WINDOW_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {}
for i, key in ipairs(KEYS) do
  local window = tonumber(ARGV[4 * i - 3]) * 1000
  local max = tonumber(ARGV[4 * i - 2])
  local count = tonumber(ARGV[4 * i - 1])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local live = redis.call('ZCARD', key)
  local accepted = math.min(count, math.max(0, max - live))
  if accepted > 0 then
    local prefix = now .. ':' .. ARGV[4 * i] .. '.'
    local members = {}
    for j = 1, accepted do
      members[2 * j - 1] = now
      members[2 * j] = prefix .. j
    end
    redis.call('ZADD', key, unpack(members))
    redis.call('PEXPIRE', key, ARGV[4 * i - 3])
  end
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  local ttl = 0
  if oldest[2] then ttl = math.ceil((tonumber(oldest[2]) + window - now) / 1000) end
  out[2 * i - 1] = live
  out[2 * i] = ttl
end
return out
`

interface WindowCommands {
  /** `slidingWindows(n, ...n keys, ...n times [windowMs, max, decisions, member prefix])`: n times [live before, ttl] */
  slidingWindows(...args: (string | number)[]): Promise<number[]>
}

export type RedisWindowClient = Redis & WindowCommands

export interface RedisWindowOptions {
  url: string
  /** A command slower than this fails (and the caller falls back). */
  commandTimeoutMs: number
  /** How long a decision may wait behind a call in flight before it is sent anyway (default 2 ms). */
  holdMs?: number
}

/**
 * An ioredis client that never queues or waits: no offline queue (a command while disconnected
 * fails at once), a short command timeout, and reconnection in the background at most 1 s apart.
 */
export function createRedisWindowClient({ url, commandTimeoutMs, holdMs = HOLD_MS }: RedisWindowOptions): RedisWindowClient {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    commandTimeout: commandTimeoutMs,
    connectTimeout: 1000,
    maxRetriesPerRequest: 0,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
    // Reconnect after READONLY etc. is not wanted; a failover shows up as errors -> fallback.
    reconnectOnError: () => false,
    // Not ioredis' auto-pipelining: its per-command bookkeeping cost the replica more CPU than
    // the writes it saves. decideInRedis batches the decisions itself.
  })
  // ioredis loads the script once (EVALSHA, EVAL when the server does not know it yet).
  client.defineCommand('slidingWindows', { lua: SLIDING_WINDOW_LUA }) // the key count comes first
  batching.set(client as RedisWindowClient, { waiting: null, hold: undefined, inFlight: 0, holdMs })
  return client as RedisWindowClient
}

/** Redis key of a rate-limit client (`ip:...` or a key id). */
export const redisKey = (client: string) => `ratelimit:${client}`

/**
 * Called once with the decision, or with the error that sends it to the caller's fallback. It
 * must not throw: the other decisions of its call are answered after it, in the same loop.
 */
export type DecisionCallback = (err: Error | null, result?: StoreResult) => void

/** Decisions that leave together for one client and quota, in the order they were asked for. */
interface Group {
  client: string
  windowMs: number
  max: number
  decisions: DecisionCallback[]
}

/** Decisions per script call: bounds how long one call holds Redis. */
const MAX_PER_CALL = 100

/** How long a decision may wait behind a call in flight before it is sent anyway. */
const HOLD_MS = 2

/**
 * When decisions leave (per Redis connection). A decision asked while no call is in flight leaves
 * at the end of its event-loop turn, with the others of that turn. One asked while a call is in
 * flight waits for that call's answer (at most holdMs, then it leaves anyway), and leaves with all
 * the others asked meanwhile. So under load a call carries what arrived during one round trip,
 * not just the few requests of one turn; each call's cost to Redis (reading, parsing and running one
 * command) and to ioredis is per call and per group, not per decision, and Redis' is paid for
 * every replica on its one core. The decisions of one call are grouped by client and quota: a
 * client's group costs Redis the commands of one decision, however many it holds (a busy
 * partner's requests often arrive together). A failed or timed-out call sends its decisions, and
 * those waiting behind it, to the caller's fallback: none waits longer than holdMs plus the
 * command timeout.
 */
interface Batching {
  /**
   * The decisions not sent yet, grouped by client and quota, in the order they were asked for;
   * while there are any, their send is due (end of turn, or holdMs behind a call in flight).
   */
  waiting: Map<string, Group> | null
  hold: NodeJS.Timeout | undefined
  inFlight: number
  holdMs: number
}

const batching = new WeakMap<RedisWindowClient, Batching>()

let sequence = 0
const processTag = `${process.pid.toString(36)}.${Math.random().toString(36).slice(2, 8)}`

/** The waiting decisions, taken out (none is due any more). */
function takeWaiting(state: Batching): Map<string, Group> | null {
  clearTimeout(state.hold)
  state.hold = undefined
  const waiting = state.waiting
  state.waiting = null
  return waiting
}

/** Sends every waiting decision, in calls of at most MAX_PER_CALL decisions. */
function send(redis: RedisWindowClient): void {
  const state = batching.get(redis)!
  const groups = takeWaiting(state)
  if (!groups) return
  let call: Group[] = []
  let size = 0
  for (const group of groups.values()) {
    for (let from = 0; from < group.decisions.length; from += MAX_PER_CALL) {
      const part = group.decisions.length <= MAX_PER_CALL ? group : { ...group, decisions: group.decisions.slice(from, from + MAX_PER_CALL) }
      if (size + part.decisions.length > MAX_PER_CALL) {
        sendCall(redis, state, call)
        call = []
        size = 0
      }
      call.push(part)
      size += part.decisions.length
    }
  }
  if (call.length > 0) sendCall(redis, state, call)
}

function sendCall(redis: RedisWindowClient, state: Batching, groups: Group[]): void {
  const args: (string | number)[] = [groups.length]
  for (const group of groups) args.push(redisKey(group.client))
  for (const group of groups) {
    sequence = (sequence + 1) % 1e9
    args.push(group.windowMs, group.max, group.decisions.length, `${processTag}.${sequence}`)
  }
  state.inFlight++
  redis.slidingWindows(...args).then(
    (reply) => {
      state.inFlight--
      for (let i = 0; i < groups.length; i++) {
        const { max, decisions } = groups[i]!
        const live = reply[2 * i]!
        const ttl = reply[2 * i + 1]!
        // As if taken one by one: the j-th is accepted while the window still has room.
        for (let j = 0; j < decisions.length; j++) decisions[j]!(null, { current: live + j < max ? live + j + 1 : max + 1, ttl })
      }
      if (state.inFlight === 0 && state.waiting) send(redis)
    },
    (err: Error) => {
      state.inFlight--
      for (const group of groups) for (const d of group.decisions) d(err)
      // Those waiting behind a failed call would most likely fail too: the fallback takes them now.
      const waiting = state.inFlight === 0 ? takeWaiting(state) : null
      for (const group of waiting?.values() ?? []) for (const d of group.decisions) d(err)
    },
  )
}

/**
 * One decision in Redis for `client`, sent with the others asked in the same turn or behind the
 * same call; `done` is called with it. A callback, not a promise: the store hands the decision
 * straight to @fastify/rate-limit's callback, without a promise and a microtask per request between.
 */
export function decideInRedis(redis: RedisWindowClient, client: string, windowMs: number, max: number, done: DecisionCallback): void {
  const state = batching.get(redis)!
  // The first decision waiting makes the send due; the others join it.
  const first = state.waiting === null
  state.waiting ??= new Map()
  const groupKey = `${windowMs} ${max} ${client}`
  let group = state.waiting.get(groupKey)
  if (!group) {
    group = { client, windowMs, max, decisions: [] }
    state.waiting.set(groupKey, group)
  }
  group.decisions.push(done)
  if (!first) return
  if (state.inFlight === 0) setImmediate(send, redis)
  else state.hold = setTimeout(send, state.holdMs, redis)
}

/** decideInRedis as a promise. */
export function takeInRedis(redis: RedisWindowClient, client: string, windowMs: number, max: number): Promise<StoreResult> {
  return new Promise((resolve, reject) => decideInRedis(redis, client, windowMs, max, (err, result) => (err ? reject(err) : resolve(result!))))
}

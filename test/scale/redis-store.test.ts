// The Redis sliding window against a real private Redis: the same exact semantics as the
// in-memory store (no 2x burst across a window boundary, rejected requests not recorded, ttl
// until the oldest accepted request leaves), and the local fallback when Redis is down or
// paused, with sharing back once it answers.
import t, { type Test } from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { SlidingWindowStore, type StoreResult } from '../../src/rate-limit/sliding-window-store.js'
import { SharedWindowStore } from '../../src/rate-limit/shared-window-store.js'
import { createRedisWindowClient, redisKey, takeInRedis, type RedisWindowClient } from '../../src/rate-limit/redis-window.js'
import { startPrivateRedis } from '../helpers/private-redis.js'

async function client(t: Test, url: string, commandTimeoutMs = 1000): Promise<RedisWindowClient> {
  const redis = createRedisWindowClient({ url, commandTimeoutMs })
  redis.on('error', () => {})
  t.teardown(() => redis.disconnect())
  while (redis.status !== 'ready') await sleep(20)
  return redis
}

const admitted = async (redis: RedisWindowClient, key: string, n: number, windowMs: number, max: number) => {
  const results = await Promise.all(Array.from({ length: n }, () => takeInRedis(redis, key, windowMs, max)))
  return results.filter((r) => r.current <= max).length
}

t.test('across a window boundary Redis admits max, never 2x max', async (t) => {
  const server = await startPrivateRedis(t)
  const redis = await client(t, server.url)
  const started = Date.now()
  t.equal(await admitted(redis, 'c', 5, 2000, 10), 5, 'first half of the quota at 0 s')
  await sleep(1000)
  t.equal(await admitted(redis, 'c', 5, 2000, 10), 5, 'second half at 1 s')
  t.equal(await admitted(redis, 'c', 10, 2000, 10), 0, 'the window is full; rejections are not recorded')
  await sleep(2200 - (Date.now() - started))
  // A fixed window would have reset at 2 s and admit 10; the sliding one frees the first 5 only.
  t.ok(Date.now() - started < 3000, 'still inside the second pair\'s window')
  t.equal(await admitted(redis, 'c', 10, 2000, 10), 5)
})

t.test('current and ttl match the in-memory store', async (t) => {
  const server = await startPrivateRedis(t)
  const redis = await client(t, server.url)
  const first = await takeInRedis(redis, 'ttl', 60_000, 2)
  t.equal(first.current, 1)
  t.ok(first.ttl > 59_000 && first.ttl <= 60_000, `ttl is one window after the only request: ${first.ttl}`)
  t.equal((await takeInRedis(redis, 'ttl', 60_000, 2)).current, 2)
  const rejected = await takeInRedis(redis, 'ttl', 60_000, 2)
  t.equal(rejected.current, 3, 'over the limit: max + 1, as in memory')
  t.ok(rejected.ttl > 0 && rejected.ttl <= first.ttl, 'ttl counts down to the oldest accepted request leaving')
  t.equal(await redis.zcard('ratelimit:ttl'), 2, 'only accepted requests are recorded')
  const ttlMs = await redis.pttl('ratelimit:ttl')
  t.ok(ttlMs > 0 && ttlMs <= 60_000, 'the set expires one window after its newest request')
  t.equal((await takeInRedis(redis, 'other', 60_000, 2)).current, 1, 'clients are independent')
})

/** Script calls Redis has run so far (EVALSHA and EVAL), from its own command statistics. */
async function scriptCalls(redis: RedisWindowClient): Promise<number> {
  const stats = await redis.info('commandstats')
  return [...stats.matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0)
}

t.test('the decisions taken in one turn of the event loop leave as one script call, answered in order', async (t) => {
  const server = await startPrivateRedis(t)
  const redis = await client(t, server.url)
  await takeInRedis(redis, 'warm', 60_000, 100) // the script is loaded (EVAL once, then EVALSHA)
  const before = await scriptCalls(redis)
  const results = await Promise.all(Array.from({ length: 50 }, (_, i) => takeInRedis(redis, i % 2 ? 'odd' : 'turn', 60_000, 20)))
  t.equal((await scriptCalls(redis)) - before, 1, '50 decisions, one call')
  const turn = results.filter((_, i) => i % 2 === 0).map((r) => r.current)
  t.same(turn, [...Array.from({ length: 20 }, (_, i) => i + 1), ...Array(5).fill(21)], "each client's decisions in the order they were taken")
  t.same(results.filter((_, i) => i % 2).map((r) => r.current), turn, 'clients in one call are counted apart')
  await takeInRedis(redis, 'turn', 60_000, 40)
  t.equal((await scriptCalls(redis)) - before, 2, 'a later turn calls again')

  // A turn with more decisions than one call takes (100) is split, still in order.
  const many = await Promise.all(Array.from({ length: 250 }, () => takeInRedis(redis, 'many', 60_000, 1000)))
  t.same(many.map((r) => r.current), Array.from({ length: 250 }, (_, i) => i + 1))
  t.equal((await scriptCalls(redis)) - before, 5, '250 decisions, three calls')
})

/** How many times Redis has run a command (scripts' own commands included), from INFO commandstats. */
async function commandCalls(redis: RedisWindowClient, command: string): Promise<number> {
  const stats = await redis.info('commandstats')
  return Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(stats)?.[1] ?? 0)
}

t.test("one client's decisions of one turn cost Redis the commands of one decision, with the same answers", async (t) => {
  const server = await startPrivateRedis(t)
  const redis = await client(t, server.url)
  await takeInRedis(redis, 'warm', 60_000, 100)
  const [zadd, zrem] = [await commandCalls(redis, 'zadd'), await commandCalls(redis, 'zremrangebyscore')]
  const results = await Promise.all(Array.from({ length: 50 }, () => takeInRedis(redis, 'hot', 60_000, 30)))
  t.equal((await commandCalls(redis, 'zadd')) - zadd, 1, '30 accepted requests, one ZADD')
  t.equal((await commandCalls(redis, 'zremrangebyscore')) - zrem, 1, 'the window expired once')
  t.same(results.map((r) => r.current), [...Array.from({ length: 30 }, (_, i) => i + 1), ...Array(20).fill(31)], 'as if taken one by one')
  t.equal(new Set(results.map((r) => r.ttl)).size, 1, 'one ttl for the group')
  t.equal(await redis.zcard(redisKey('hot')), 30, 'every accepted request is its own member')
  const later = await Promise.all([takeInRedis(redis, 'hot', 60_000, 30), takeInRedis(redis, 'hot', 60_000, 32)])
  t.equal(later[0]!.current, 31, 'the full window refuses: max + 1')
  t.equal(later[1]!.current, 31, 'a larger quota for the same client is its own group: the 31st live request')
  t.equal(await redis.zcard(redisKey('hot')), 31)
})

const nextTurn = () => new Promise((resolve) => setImmediate(resolve))

// Holds Redis for `ms` (a script runs alone): a call sent meanwhile stays in flight that long.
const BUSY_LUA = `
local s = redis.call('TIME')
local start = s[1] * 1000000 + s[2]
repeat
  local t = redis.call('TIME')
until t[1] * 1000000 + t[2] - start > tonumber(ARGV[1]) * 1000
return 1`

/**
 * A client with the given hold, whose first decision on `key` is in flight while Redis runs a
 * script for `busyMs`; `sends` holds the time of each script call it sends from then on
 * (instrumented at the client, Redis is not touched).
 */
async function behindBusyRedis(t: Test, holdMs: number, busyMs: number, key: string) {
  const server = await startPrivateRedis(t)
  const redis = createRedisWindowClient({ url: server.url, commandTimeoutMs: 5000, holdMs })
  t.teardown(() => redis.disconnect())
  const blocker = await client(t, server.url, 5000)
  while (redis.status !== 'ready') await sleep(20)
  await takeInRedis(redis, 'warm', 60_000, 100)
  const sends: number[] = []
  const original = redis.slidingWindows.bind(redis)
  redis.slidingWindows = (...args) => {
    sends.push(Date.now())
    return original(...args)
  }
  const busy = blocker.eval(BUSY_LUA, 0, busyMs)
  await sleep(30) // Redis is running the busy script
  const first = takeInRedis(redis, key, 60_000, 100)
  await nextTurn()
  await nextTurn()
  return { redis, sends, busy, first }
}

t.test('decisions asked while a call is in flight wait for its answer and leave together', async (t) => {
  const { redis, sends, busy, first } = await behindBusyRedis(t, 5000, 300, 'held')
  t.equal(sends.length, 1, 'the first decision left at the end of its turn')
  const later: Promise<StoreResult>[] = []
  for (let i = 0; i < 5; i++) {
    later.push(takeInRedis(redis, 'held', 60_000, 100))
    await nextTurn()
  }
  t.equal(sends.length, 1, 'five more, asked in five later turns, wait behind the call in flight')
  const results = await Promise.all([first, ...later])
  t.equal(sends.length, 2, 'and leave together as one call when it answers')
  t.same(results.map((r) => r.current), [1, 2, 3, 4, 5, 6], 'in the order they were asked')
  await busy
})

t.test('a decision waits behind a slow call at most holdMs, then leaves anyway', async (t) => {
  const { redis, sends, busy, first } = await behindBusyRedis(t, 20, 400, 'slow')
  t.equal(sends.length, 1, 'the first decision left at the end of its turn')
  const asked = Date.now()
  const second = takeInRedis(redis, 'slow', 60_000, 100)
  await sleep(150)
  t.equal(sends.length, 2, 'sent while the first call was still in flight')
  t.ok(sends[1]! - asked >= 15 && sends[1]! - asked < 150, `after the hold: ${sends[1]! - asked} ms`)
  t.same((await Promise.all([first, second])).map((r) => r.current), [1, 2])
  await busy
})

t.test('Redis down or paused: decisions fall back to the local window; sharing returns when it answers', async (t) => {
  const server = await startPrivateRedis(t)
  const redis = createRedisWindowClient({ url: server.url, commandTimeoutMs: 50 })
  const local = new SlidingWindowStore()
  const reasons: string[] = []
  const store = new SharedWindowStore({ redis, local, onFallback: (r) => reasons.push(r), probeEveryMs: 200 })
  t.teardown(() => {
    store.close()
    redis.disconnect()
  })
  const incr = (key: string, max = 3) => new Promise<StoreResult>((resolve, reject) => store.incr(key, (err, res) => (err ? reject(err) : resolve(res)), 60_000, max))
  const untilShared = async () => {
    for (let i = 0; i < 200 && !store.shared; i++) await sleep(50)
    return store.shared
  }

  t.ok(await untilShared(), 'shared once connected')
  await incr('k')
  t.equal(await redis.zcard('ratelimit:k'), 1, 'the decision was taken in Redis')
  t.same(reasons, [])

  await server.stop()
  const down = await Promise.all([incr('k'), incr('k'), incr('k'), incr('k')])
  t.same(down.map((r) => r.current), [1, 2, 3, 4], 'local window (starts empty) still limits at max')
  t.ok(reasons.length >= 4, 'every local decision is reported')

  await server.start()
  t.ok(await untilShared(), 'sharing returns after Redis answers again')
  reasons.length = 0
  t.equal((await incr('k')).current, 1, 'Redis started empty; local counts were not copied into it')
  t.same(reasons, [])

  server.pause()
  const paused = await incr('k')
  t.equal(paused.current, 4, 'a paused Redis times out; the local window decides (still full from the outage: max + 1)')
  t.ok(reasons.length >= 1)
  t.notOk(store.shared)
  server.resume()
  t.ok(await untilShared(), 'sharing returns once Redis answers the probe')
})

t.test('a window emptied of many stamps at once, and one half emptied', async (t) => {
  const server = await startPrivateRedis(t)
  const redis = await client(t, server.url)
  t.equal(await admitted(redis, 'burst', 70, 300, 100), 70)
  await sleep(350)
  const next = await takeInRedis(redis, 'burst', 300, 100)
  t.equal(next.current, 1, 'every earlier stamp left the window')
  t.ok(next.ttl > 250 && next.ttl <= 300, `ttl is one window after the only live request: ${next.ttl}`)
  t.equal(await redis.zcard(redisKey('burst')), 1, 'the expired stamps are gone from Redis')
  t.equal(await admitted(redis, 'half', 40, 400, 1000), 40)
  await sleep(200)
  t.equal(await admitted(redis, 'half', 40, 400, 1000), 40)
  await sleep(250)
  const after = await takeInRedis(redis, 'half', 400, 1000)
  t.equal(after.current, 41, 'the first 40 left; the second 40 and this one are live')
  t.ok(after.ttl > 100 && after.ttl <= 200, `ttl runs to the second group leaving: ${after.ttl}`)
})

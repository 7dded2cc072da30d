// The limiter holds a true sliding window (a fixed window lets 2x through across a boundary)
// and stays bounded in memory with 100k distinct clients.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { SlidingWindowStore } from '../../src/rate-limit/sliding-window-store.js'
import { buildTestApp } from '../helpers/app.js'

function incr(store: SlidingWindowStore, key: string, window: number, max: number) {
  let result = { current: 0, ttl: 0 }
  store.incr(key, (_err, r) => (result = r), window, max)
  return result
}

t.test('across a window boundary the store admits max, never 2x max', async (t) => {
  let now = 0
  const store = new SlidingWindowStore({ now: () => now })
  const admitted = (count: number) =>
    Array.from({ length: count }, () => incr(store, 'c', 1000, 10)).filter((r) => r.current <= 10).length
  now = 900
  t.equal(admitted(10), 10, 'a burst at the end of the first second')
  now = 1001
  t.equal(admitted(10), 0, 'a fixed window would reset here and admit 10 more')
  now = 1900
  t.equal(admitted(10), 10, 'the slots free exactly one window after use')
  now = 1950
  t.equal(admitted(1), 0)
})

t.test('ttl is the time until the oldest request leaves the window', async (t) => {
  let now = 0
  const store = new SlidingWindowStore({ now: () => now })
  incr(store, 'c', 1000, 2)
  now = 300
  incr(store, 'c', 1000, 2)
  now = 400
  t.same(incr(store, 'c', 1000, 2), { current: 3, ttl: 600 })
  now = 1000
  t.same(incr(store, 'c', 1000, 2), { current: 2, ttl: 300 }, 'the first slot freed at 1000')
})

t.test('memory stays bounded: idle clients are swept, at most maxClients kept', async (t) => {
  let now = 0
  const store = new SlidingWindowStore({ now: () => now, maxAddressClients: 50_000 })
  for (let i = 0; i < 100_000; i++) incr(store, `ip:client-${i}`, 60_000, 100)
  t.equal(store.size, 50_000, 'capped at maxClients, oldest dropped first')
  t.equal(incr(store, 'ip:client-99999', 60_000, 100).current, 2, 'recent clients keep their history')
  now = 120_001
  incr(store, 'late', 60_000, 100)
  t.equal(store.size, 1, 'everyone idle for a window is swept')
  for (let i = 0; i < 1000; i++) incr(store, 'busy', 60_000, 100)
  t.ok(store.size <= 2)
})

t.test('over HTTP: 2 + 2 requests, then 4 just after the first pair expired: only 2 pass', async (t) => {
  // The app's windows on a clock the test moves: no sleep, and no race with a busy machine.
  let now = 0
  const api = await buildTestApp(
    t,
    { RATE_LIMIT_MAX: '4', RATE_LIMIT_WINDOW_MS: '2000' },
    { rateLimitClock: () => now },
  )
  const url = `/api/v1/user/${randomUUID()}/window`
  const statuses = async (n: number) =>
    (await Promise.all(Array.from({ length: n }, () => api.get(url)))).map((r) => r.statusCode)
  t.same(await statuses(2), [404, 404])
  now = 1000
  t.same(await statuses(2), [404, 404])
  now = 2300 // the first pair left the window; the second pair is still in it for 700 ms
  const burst = await statuses(4)
  t.equal(burst.filter((s) => s === 404).length, 2, `a fixed window would pass all 4: ${burst}`)
  t.equal(burst.filter((s) => s === 429).length, 2)
})

t.test('clients without a key are limited by address: IPv6 by its /64, IPv4-mapped as IPv4', async (t) => {
  const api = await buildTestApp(t, { RATE_LIMIT_MAX: '2', RATE_LIMIT_WINDOW_MS: '60000' })
  const url = `/api/v1/user/${randomUUID()}/by-address`
  const status = async (remoteAddress: string) =>
    (await api.request({ method: 'GET', url, key: null, remoteAddress })).statusCode
  // Two hosts in one /64 (an attacker rotating its addresses) share one window.
  t.same([await status('2001:db8:1:2::1'), await status('2001:db8:1:2:ffff::9')], [401, 401])
  t.equal(await status('2001:db8:1:2:abcd::1'), 429, 'a third address in the same /64 is over the limit')
  t.equal(await status('2001:db8:1:3::1'), 401, 'the next /64 is another client')
  t.same([await status('203.0.113.9'), await status('::ffff:203.0.113.9')], [401, 401])
  t.equal(await status('203.0.113.9'), 429, 'an IPv4-mapped address counts as its IPv4 address')
  t.equal(await status('203.0.113.10'), 401, 'IPv4 addresses are clients one by one')
})

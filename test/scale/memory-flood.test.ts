// A flood of source addresses (or made-up keys, which count against the address) can neither
// evict nor reset a configured key's window, and the in-memory store stays bounded.
import t from 'tap'
import { SlidingWindowStore } from '../../src/rate-limit/sliding-window-store.js'

t.test('150,000 addresses do not reset an exhausted key window; the store stays bounded', async (t) => {
  let now = 0
  const store = new SlidingWindowStore({ now: () => now })
  const max = 5
  for (let i = 0; i < max; i++) t.equal(store.take('key-configured', 60_000, max).current, i + 1)
  t.equal(store.take('key-configured', 60_000, max).current, max + 1, 'exhausted: 429')
  for (let i = 0; i < 150_000; i++) {
    now += 0.1 // 15 s of flood, inside the key's window
    store.take(`ip:10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, 60_000, max)
  }
  t.ok(store.size <= 100_001, `bounded: ${store.size} clients held`)
  const after = store.take('key-configured', 60_000, max)
  t.equal(after.current, max + 1, 'still 429 inside the same window')
  t.ok(after.ttl > 0 && after.ttl <= 60_000 - 15_000, 'the window still ends when its oldest request leaves')
  now = 60_001
  t.equal(store.take('key-configured', 60_000, max).current, 1, 'and frees one window after use, not before')
})

t.test('address clients beyond the cap are dropped least recently seen first', async (t) => {
  let now = 0
  const store = new SlidingWindowStore({ now: () => now, maxAddressClients: 1000 })
  for (let i = 0; i < 1000; i++) store.take(`ip:a${i}`, 60_000, 10)
  store.take('ip:a0', 60_000, 10) // a0 is now the most recent
  store.take('ip:new', 60_000, 10)
  t.equal(store.size, 1000)
  t.equal(store.take('ip:a0', 60_000, 10).current, 3, 'a recently seen address keeps its history')
  t.equal(store.take('ip:a1', 60_000, 10).current, 1, 'the least recently seen was dropped')
  now = 120_001
  store.take('ip:late', 60_000, 10)
  t.equal(store.size, 1, 'idle clients are swept after their window')
})

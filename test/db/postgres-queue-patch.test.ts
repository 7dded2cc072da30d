// patches/postgres+3.4.9.patch: postgres.js's connection queues must stay bounded when they
// never empty (sustained load). Unpatched, shift() leaves holes at the front until the queue
// empties and remove() scans them from index 0, so both memory and remove() cost grow without
// bound (measured: GET by key fell from ~18k to ~8.5k req/s in 3 minutes). Patched, shift()
// compacts the array once half of it is holes.
import t from 'tap'
import path from 'node:path'
import { projectRoot } from '../../src/paths.js'

type Queue = { length: number; push(x: unknown): unknown; shift(): unknown; remove(x: unknown): unknown }

// The ESM build: the one the service loads and the one patched.
for (const file of ['node_modules/postgres/src/queue.js']) {
  t.test(`${file}: a queue that never empties keeps a small backing array`, async (t) => {
    const load = (await import(path.join(projectRoot, file))).default
    const queue: Queue = load()
    // Observe the backing array through the searches remove() makes.
    let longestScan = 0
    let removed = 0
    const indexOf = Array.prototype.indexOf
    Array.prototype.indexOf = function (this: unknown[], ...args: [unknown, number?]) {
      longestScan = Math.max(longestScan, this.length - (args[1] ?? 0))
      return indexOf.apply(this, args)
    }
    try {
      for (let i = 0; i < 3; i++) queue.push({ id: -i })
      for (let i = 0; i < 100_000; i++) {
        const item = { id: i }
        queue.push(item)
        queue.shift()
        if (i % 10 === 0) {
          const extra = { id: `x${i}` }
          queue.push(extra)
          if (queue.remove(extra) === extra) removed++
        }
      }
    } finally {
      Array.prototype.indexOf = indexOf
    }
    t.equal(removed, 10_000, 'every removal found its item')
    t.equal(queue.length, 3, 'semantics kept: three items still queued')
    t.ok(longestScan < 100, `remove() scanned at most ${longestScan} slots (unpatched: ~100000)`)
    t.same(
      [queue.shift(), queue.shift(), queue.shift()].map((x) => (x as { id: number }).id),
      [99_997, 99_998, 99_999],
      'FIFO order kept',
    )
  })
}

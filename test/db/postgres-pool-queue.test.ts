// postgres.js's pool queue must stay bounded when it never empties (sustained load). A queue that
// kept its consumed slots and searched them from index 0 made throughput fall from ~18k to
// ~8.5k req/s within 3 minutes here (postgres.js 3.4.9, which the service patched). postgres.js
// 4 compacts the consumed prefix and searches from the head: this holds it to that on upgrades.
// The queue is internal (src/pool.js exports it for the pool), so it is loaded by path.
import t from 'tap'
import path from 'node:path'
import { projectRoot } from '../../src/paths.js'

interface Queue {
  length: number
  xs: unknown[]
  push(x: unknown): unknown
  shift(): unknown
  remove(matches: (x: unknown) => boolean): boolean
}

t.test("the pool's wait queue that never empties keeps a small backing array", async (t) => {
  const { Queue } = await import(path.join(projectRoot, 'node_modules/postgres/src/pool.js'))
  const queue: Queue = Queue()
  let longest = 0
  let removed = 0
  for (let i = 0; i < 3; i++) queue.push({ id: -i })
  for (let i = 0; i < 100_000; i++) {
    queue.push({ id: i })
    queue.shift()
    if (i % 10 === 0) {
      const extra = { id: `x${i}` }
      queue.push(extra)
      if (queue.remove((x) => x === extra)) removed++
    }
    longest = Math.max(longest, queue.xs.length)
  }
  t.equal(removed, 10_000, 'every removal found its item')
  t.equal(queue.length, 3, 'three items still queued')
  t.ok(longest < 5000, `the backing array stayed at most ${longest} long (never compacted: ~100000)`)
  t.same(
    [queue.shift(), queue.shift(), queue.shift()].map((x) => (x as { id: number }).id),
    [99_997, 99_998, 99_999],
    'FIFO order kept',
  )
})

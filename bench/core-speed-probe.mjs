// One core's speed, for bench/core-speed.ts: on each line read, a fixed piece of memory-bound
// work (a random walk over 32 MiB, beyond a core's cache), answered with the CPU time it took
// in ms. Same work every time, so on a steady machine the same time: a time that moves means
// the core (or the memory behind it) got slower or faster, whatever the benchmark did.
import { createInterface } from 'node:readline'

const ENTRIES = 8 * 1024 * 1024
const STEPS = 300_000

// Sattolo's shuffle: one cycle through every entry, so the walk never settles into a short loop.
const next = new Uint32Array(ENTRIES)
for (let i = 0; i < ENTRIES; i++) next[i] = i
let seed = 0x9e3779b9
for (let i = ENTRIES - 1; i > 0; i--) {
  seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0
  const j = seed % i
  const t = next[i]
  next[i] = next[j]
  next[j] = t
}

let at = 0
createInterface({ input: process.stdin }).on('line', () => {
  const before = process.cpuUsage()
  for (let k = 0; k < STEPS; k++) at = next[at]
  const spent = process.cpuUsage(before)
  process.stdout.write(`${((spent.user + spent.system) / 1000).toFixed(2)}\n`)
})

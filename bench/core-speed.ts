// How fast each core is right now. On a shared VM a core's speed moves by tens of per cent
// within minutes, and a long run (the soak) cannot tell that from drift in what it measures
// unless it measures the machine too: one probe process per core, pinned there, times the same
// memory-bound work on demand (core-speed-probe.mjs). Each reading costs its core well under
// 1 % at one reading per 10 s.
import { type ChildProcess, spawn } from 'node:child_process'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { projectRoot } from '../src/paths.js'
import { mean } from './harness.js'

const PROBE = path.join(projectRoot, 'bench/core-speed-probe.mjs')

export interface CoreSpeedProbes {
  /** The fixed work's CPU time on each core, in ms, in the order the cores were given. */
  read(): Promise<number[]>
  stop(): void
}

export function startCoreSpeedProbes(cpus: readonly string[]): CoreSpeedProbes {
  const probes = cpus.map((cpu) => {
    const child: ChildProcess = spawn('taskset', ['-c', cpu, process.execPath, PROBE], {
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    const waiting: ((ms: number) => void)[] = []
    createInterface({ input: child.stdout! }).on('line', (line) => waiting.shift()?.(Number(line)))
    return {
      child,
      read: () =>
        new Promise<number>((resolve) => {
          waiting.push(resolve)
          child.stdin!.write('\n')
        }),
    }
  })
  return {
    // One core after the other: two probes at once would share the memory they measure.
    async read() {
      const times: number[] = []
      for (const probe of probes) times.push(await probe.read())
      return times
    },
    stop() {
      for (const probe of probes) probe.child.kill()
    },
  }
}

/** Pearson's correlation of two equally long series (NaN when either is constant). */
export function correlation(xs: readonly number[], ys: readonly number[]): number {
  const mx = mean(xs)
  const my = mean(ys)
  let sxy = 0
  let sxx = 0
  let syy = 0
  for (let i = 0; i < xs.length; i++) {
    sxy += (xs[i]! - mx) * (ys[i]! - my)
    sxx += (xs[i]! - mx) ** 2
    syy += (ys[i]! - my) ** 2
  }
  return sxy / Math.sqrt(sxx * syy)
}

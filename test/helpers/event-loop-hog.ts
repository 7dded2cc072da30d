// Keeps this process's event loop late (synchronous work in slices, with I/O between them)
// until stopped: how tests make load shedding see real overload.
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'

export function hogEventLoop(sliceMs = 200): () => void {
  let hogging = true
  const hog = () => {
    if (!hogging) return
    const end = performance.now() + sliceMs
    while (performance.now() < end);
    setImmediate(hog)
  }
  hog()
  return () => {
    hogging = false
  }
}

/**
 * Hogs the loop until the app's load shedding has taken a sample that shows it (at most
 * `withinMs`), and returns the function that stops hogging. Load shedding reads the mean delay
 * of one-second windows, so how soon a window counts as overloaded depends on where its
 * boundary fell against the hog's start: waiting a fixed time made the tests flaky on a busy
 * machine. Throws if the app never turns overloaded.
 */
export async function hogUntilOverloaded(app: FastifyInstance, withinMs = 10_000): Promise<() => void> {
  const stop = hogEventLoop()
  const deadline = performance.now() + withinMs
  while (!app.loadShedding.overloaded()) {
    if (performance.now() > deadline) {
      stop()
      throw new Error(`not overloaded within ${withinMs} ms of hogging the event loop`)
    }
    await sleep(50)
  }
  return stop
}

// A true sliding-window store for @fastify/rate-limit: each client keeps the timestamps of its
// accepted requests inside the window, so no burst across a window boundary gets through
// (the bundled store is a fixed window). Memory is bounded: idle clients are swept and at
// most `maxClients` are kept (the least recently seen are dropped first).

interface ClientLog {
  stamps: number[]
  head: number // index of the oldest live timestamp
}

export interface SlidingWindowOptions {
  maxClients?: number
  now?: () => number
}

type IncrCallback = (err: Error | null, res: { current: number; ttl: number }) => void

export class SlidingWindowStore {
  private readonly clients = new Map<string, ClientLog>()
  private readonly maxClients: number
  private readonly now: () => number
  private lastSweep = 0

  constructor(options: SlidingWindowOptions = {}) {
    this.maxClients = options.maxClients ?? 100_000
    this.now = options.now ?? (() => performance.now())
  }

  get size(): number {
    return this.clients.size
  }

  incr(key: string, cb: IncrCallback, timeWindow: number, max: number): void {
    const now = this.now()
    this.sweep(now, timeWindow)
    let log = this.clients.get(key)
    if (log) {
      this.clients.delete(key) // re-insert below: Map order is recency order
    } else {
      log = { stamps: [], head: 0 }
      if (this.clients.size >= this.maxClients) this.clients.delete(this.clients.keys().next().value!)
    }
    this.clients.set(key, log)
    this.expire(log, now - timeWindow)
    const live = log.stamps.length - log.head
    if (live < max) {
      log.stamps.push(now)
      cb(null, { current: live + 1, ttl: Math.max(0, log.stamps[log.head]! + timeWindow - now) })
    } else {
      // Rejected requests are not recorded: the window frees a slot when the oldest expires.
      cb(null, { current: max + 1, ttl: Math.max(0, log.stamps[log.head]! + timeWindow - now) })
    }
  }

  child(): SlidingWindowStore {
    return this
  }

  private expire(log: ClientLog, cutoff: number): void {
    while (log.head < log.stamps.length && log.stamps[log.head]! <= cutoff) log.head++
    if (log.head > 64 && log.head * 2 >= log.stamps.length) {
      log.stamps = log.stamps.slice(log.head)
      log.head = 0
    }
  }

  /** Drops clients whose newest request left the window; at most once per window. */
  private sweep(now: number, timeWindow: number): void {
    if (now - this.lastSweep < timeWindow) return
    this.lastSweep = now
    for (const [key, log] of this.clients) {
      if (log.stamps.length === log.head || log.stamps[log.stamps.length - 1]! <= now - timeWindow) this.clients.delete(key)
    }
  }
}

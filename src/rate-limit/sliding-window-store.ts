// A true sliding-window store for @fastify/rate-limit: each client keeps the timestamps of its
// accepted requests inside the window, so no burst across a window boundary gets through
// (the bundled store is a fixed window).
//
// Memory is bounded without letting a flood reset anyone who matters: address clients
// (`ip:...`) live in a map capped at `maxAddressClients` (least recently seen dropped first);
// API key clients live in their own map, which a flood cannot grow (made-up keys count against
// the address, so only configured key ids get there) and which is never trimmed by the cap.
// Idle clients of both kinds are swept once their newest request has left their window.

/** Clients whose key starts with this are source addresses; anything else is a configured key id. */
export const ADDRESS_PREFIX = 'ip:'

interface ClientLog {
  stamps: number[]
  head: number // index of the oldest live timestamp
  window: number // the client's window, for the sweep (quotas may differ per key)
}

export interface SlidingWindowOptions {
  /** Cap on address clients; key clients are bounded by configuration instead. */
  maxAddressClients?: number
  now?: () => number
}

export interface StoreResult {
  current: number
  ttl: number
}
export type IncrCallback = (err: Error | null, res: StoreResult) => void

export class SlidingWindowStore {
  private readonly addresses = new Map<string, ClientLog>()
  private readonly keys = new Map<string, ClientLog>()
  private readonly maxAddressClients: number
  private readonly now: () => number
  private lastSweep = 0
  private sweepEvery = Number.POSITIVE_INFINITY

  constructor(options: SlidingWindowOptions = {}) {
    this.maxAddressClients = options.maxAddressClients ?? 100_000
    this.now = options.now ?? (() => performance.now())
  }

  /** Clients held (addresses and keys). */
  get size(): number {
    return this.addresses.size + this.keys.size
  }

  incr(key: string, cb: IncrCallback, timeWindow: number, max: number): void {
    cb(null, this.take(key, timeWindow, max))
  }

  /** One decision: records the request if fewer than `max` were accepted in the last `timeWindow` ms. */
  take(key: string, timeWindow: number, max: number): StoreResult {
    const now = this.now()
    this.sweep(now, timeWindow)
    const log = key.startsWith(ADDRESS_PREFIX) ? this.touchAddress(key, timeWindow) : this.touchKey(key, timeWindow)
    this.expire(log, now - timeWindow)
    const live = log.stamps.length - log.head
    // Rejected requests are not recorded: the window frees a slot when the oldest expires.
    const accepted = live < max
    if (accepted) log.stamps.push(now)
    const ttl = log.head < log.stamps.length ? Math.max(0, log.stamps[log.head]! + timeWindow - now) : 0
    return { current: accepted ? live + 1 : max + 1, ttl }
  }

  child(): SlidingWindowStore {
    return this
  }

  private touchKey(key: string, window: number): ClientLog {
    let log = this.keys.get(key)
    if (!log) {
      log = { stamps: [], head: 0, window }
      this.keys.set(key, log)
    }
    log.window = window
    return log
  }

  private touchAddress(key: string, window: number): ClientLog {
    let log = this.addresses.get(key)
    if (log) {
      this.addresses.delete(key) // re-insert below: Map order is recency order
    } else {
      log = { stamps: [], head: 0, window }
      if (this.addresses.size >= this.maxAddressClients) this.addresses.delete(this.addresses.keys().next().value!)
    }
    this.addresses.set(key, log)
    log.window = window
    return log
  }

  private expire(log: ClientLog, cutoff: number): void {
    while (log.head < log.stamps.length && log.stamps[log.head]! <= cutoff) log.head++
    if (log.head > 64 && log.head * 2 >= log.stamps.length) {
      log.stamps = log.stamps.slice(log.head)
      log.head = 0
    }
  }

  /** Drops clients whose newest request left their window; at most once per (shortest) window seen. */
  private sweep(now: number, timeWindow: number): void {
    if (timeWindow < this.sweepEvery) this.sweepEvery = timeWindow
    if (now - this.lastSweep < this.sweepEvery) return
    this.lastSweep = now
    for (const clients of [this.addresses, this.keys]) {
      for (const [key, log] of clients) {
        if (log.stamps.length === log.head || log.stamps[log.stamps.length - 1]! <= now - log.window)
          clients.delete(key)
      }
    }
  }
}

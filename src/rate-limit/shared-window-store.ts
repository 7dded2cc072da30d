// The store used with REDIS_URL: every replica shares the windows in Redis. When Redis is down,
// not yet connected, or slower than the command timeout, the decision is taken in this process'
// own sliding window instead (it may start empty; its counts are never copied into Redis), so a
// request never fails and never waits longer than the timeout. A probe brings Redis back.
import type { IncrCallback, SlidingWindowStore, StoreResult } from './sliding-window-store.js'
import { decideInRedis, type RedisWindowClient } from './redis-window.js'

export interface SharedWindowOptions {
  redis: RedisWindowClient
  local: SlidingWindowStore
  /** Called for every decision taken locally while Redis is configured. */
  onFallback: (reason: string) => void
  /** Called when Redis answers again after a fallback. */
  onRecover?: () => void
  /** How often Redis is probed while the local window is in use. */
  probeEveryMs?: number
}

export class SharedWindowStore {
  private readonly redis: RedisWindowClient
  private readonly local: SlidingWindowStore
  private readonly onFallback: (reason: string) => void
  private readonly onRecover: () => void
  private readonly probeEveryMs: number
  /** Redis answered the last command or probe; false until the first connection is ready. */
  private healthy = false
  private reason = 'Redis not connected yet'
  private probe: NodeJS.Timeout | undefined

  constructor(options: SharedWindowOptions) {
    this.redis = options.redis
    this.local = options.local
    this.onFallback = options.onFallback
    this.onRecover = options.onRecover ?? (() => {})
    this.probeEveryMs = options.probeEveryMs ?? 1000
    this.redis.on('ready', () => void this.check())
    // Errors surface through commands and probes; without a listener ioredis prints them itself.
    this.redis.on('error', () => {})
    this.redis.on('end', () => this.down('Redis connection closed'))
    this.redis.on('close', () => this.down('Redis connection closed'))
  }

  /** True while decisions go to Redis. */
  get shared(): boolean {
    return this.healthy
  }

  incr(key: string, cb: IncrCallback, timeWindow: number, max: number): void {
    if (!this.healthy || this.redis.status !== 'ready') {
      cb(null, this.fallback(key, timeWindow, max, this.healthy ? 'Redis not connected' : this.reason))
      return
    }
    decideInRedis(this.redis, key, timeWindow, max, (err, result) => {
      if (!err) return cb(null, result!)
      this.down(err.message)
      cb(null, this.fallback(key, timeWindow, max, this.reason))
    })
  }

  child(): SharedWindowStore {
    return this
  }

  /** Stops probing (the caller quits the client). */
  close(): void {
    clearInterval(this.probe)
    this.probe = undefined
  }

  private fallback(key: string, timeWindow: number, max: number, reason: string): StoreResult {
    this.onFallback(reason)
    return this.local.take(key, timeWindow, max)
  }

  private down(reason: string): void {
    this.healthy = false
    this.reason = reason
    if (this.probe) return
    this.probe = setInterval(() => void this.check(), this.probeEveryMs)
    this.probe.unref()
  }

  /** A PING within the command timeout puts Redis back in use. */
  private async check(): Promise<void> {
    if (this.redis.status !== 'ready') return
    try {
      await this.redis.ping()
      if (this.healthy) return
      this.healthy = true
      this.onRecover()
      clearInterval(this.probe)
      this.probe = undefined
    } catch (err) {
      this.down((err as Error).message)
    }
  }
}

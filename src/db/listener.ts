// LISTEN on one channel over a connection of its own that is re-established after every loss
// (a restarted or failed-over primary, a killed backend). postgres.js's `sql.listen` re-listens
// once when its connection closes and drops the listener if that attempt fails, which a primary
// that is down for a second makes likely; here the attempt is repeated until it succeeds.
// Notifications sent while no LISTEN was in place are lost, so `onReady` runs each time one is in
// place (the first time and after every loss): the caller re-reads what the channel announces.
import postgres from 'postgres'
import type { Sql } from './client.js'

export interface Listener {
  close(): Promise<void>
}

export interface ListenOptions {
  channel: string
  onNotify(payload: string): void
  onReady(): void
  /** A failed attempt, before the next one. */
  onError(err: unknown): void
  /** ms between attempts (default 250, doubling to 2000) */
  retryMs?: number
}

/** Listens with the pool's connection options (hosts, target_session_attrs, timeouts). */
export function listen(pool: Sql, options: ListenOptions): Listener {
  let closed = false
  let timer: NodeJS.Timeout | undefined
  let delay = options.retryMs ?? 250
  const client = postgres({
    ...(pool.options as unknown as postgres.Options<Record<string, never>>),
    max: 1,
    idle_timeout: null,
    max_lifetime: null,
    fetch_types: false,
    // Told apart from the pool's connections in pg_stat_activity (one per replica, beside the pool).
    connection: { ...pool.options.connection, application_name: 'study-service-listener' },
    onnotify: (channel: string, payload: string) => {
      if (channel === options.channel) options.onNotify(payload)
    },
    onclose: () => {
      if (!closed) schedule(0)
    },
  } as unknown as postgres.Options<Record<string, never>>)

  const attempt = async () => {
    timer = undefined
    if (closed) return
    try {
      await client`listen ${client(options.channel)}`
      delay = options.retryMs ?? 250
      if (!closed) options.onReady()
    } catch (err) {
      if (closed) return
      options.onError(err)
      schedule(delay)
      delay = Math.min(delay * 2, 2000)
    }
  }
  function schedule(ms: number) {
    if (timer === undefined && !closed) timer = setTimeout(attempt, ms)
  }
  schedule(0)

  return {
    async close() {
      closed = true
      clearTimeout(timer)
      await client.end({ timeout: 1 })
    },
  }
}

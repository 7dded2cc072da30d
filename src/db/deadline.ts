// Deadlines on a request's database work, kept on the client: a frozen server (SIGSTOP) or a
// pool whose connections are all held never answers, and then a server-side statement_timeout
// never fires. A request's handler runs inside a scope (runWithDatabaseDeadline) that fixes when
// its database work must be over; every call the service makes on its behalf races that moment.
// Outside a request (purges, rollups, migrations) nothing is bounded here: those jobs set their
// own server-side timeouts.
import { AsyncLocalStorage } from 'node:async_hooks'

/** Why a request's database work was cut: no connection in time, or its deadline passed. */
export type DeadlineReason = 'connection_wait' | 'deadline' | 'statement_timeout'
export const DEADLINE_REASONS: readonly DeadlineReason[] = ['connection_wait', 'deadline', 'statement_timeout']

/** Answered as 503 COMMON_503 with Retry-After (src/db/unavailable.ts). */
export class DatabaseDeadlineExceeded extends Error {
  readonly code = 'DATABASE_DEADLINE_EXCEEDED'
  constructor(readonly reason: DeadlineReason) {
    super(reason === 'connection_wait' ? 'no database connection within the wait' : 'database work past its deadline')
  }
}

export interface DatabaseDeadlineSettings {
  /** DATABASE_CONNECTION_WAIT_MS: the longest a request waits for a connection of its own. */
  connectionWaitMs: number
  /** DATABASE_STATEMENT_TIMEOUT_MS: each statement's server-side statement_timeout. */
  statementTimeoutMs: number
}

interface RequestDeadline {
  /** performance.now() at which the request's database work must be over. */
  endsAt: number
  settings: DatabaseDeadlineSettings
}

const current = new AsyncLocalStorage<RequestDeadline>()

/**
 * Runs a request's handler with its database deadline: connection wait plus statement timeout
 * from now. Every database call the handler makes (directly or through awaited promises) is
 * bounded by it.
 */
export function runWithDatabaseDeadline<T>(settings: DatabaseDeadlineSettings, handler: () => T): T {
  const endsAt = performance.now() + settings.connectionWaitMs + settings.statementTimeoutMs
  return current.run({ endsAt, settings }, handler)
}

/** True inside a request's deadline scope. */
export const hasDatabaseDeadline = (): boolean => current.getStore() !== undefined

/** Milliseconds left before the request's deadline; Infinity outside a request. */
export function remainingMs(): number {
  const scope = current.getStore()
  return scope === undefined ? Number.POSITIVE_INFINITY : scope.endsAt - performance.now()
}

/** The current request's connection wait bound (never past its deadline); Infinity outside a request. */
export function connectionWaitMs(): number {
  const scope = current.getStore()
  return scope === undefined ? Number.POSITIVE_INFINITY : Math.min(scope.settings.connectionWaitMs, remainingMs())
}

/**
 * `work`'s outcome, or DatabaseDeadlineExceeded(reason) once `ms` have passed. Work that settles
 * later is not lost: `late` receives its value (a connection to give back); a late failure is
 * swallowed (nobody is waiting for it any more).
 */
export function within<T>(
  work: Promise<T>,
  ms: number,
  reason: DeadlineReason,
  onExceeded: (reason: DeadlineReason) => void,
  late?: (value: T) => void,
): Promise<T> {
  if (ms === Number.POSITIVE_INFINITY) return work
  return new Promise<T>((resolve, reject) => {
    let settled = false
    const timer = setTimeout(
      () => {
        settled = true
        onExceeded(reason)
        reject(new DatabaseDeadlineExceeded(reason))
      },
      Math.max(0, ms),
    )
    work.then(
      (value) => {
        if (!settled) {
          settled = true
          clearTimeout(timer)
          resolve(value)
        } else late?.(value)
      },
      (err) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        reject(err)
      },
    )
  })
}

/** True for an error that ended a request's database work at its deadline. */
export const isDeadlineExceeded = (err: unknown): err is DatabaseDeadlineExceeded =>
  err instanceof DatabaseDeadlineExceeded

/**
 * A database call made for the current request: bounded by its deadline (reason `deadline`),
 * and a statement the server cancelled by its statement_timeout (57014) counted as such.
 * Outside a request it is `work` itself.
 */
export function bounded<T>(work: Promise<T>, onExceeded: (reason: DeadlineReason) => void): Promise<T> {
  if (!hasDatabaseDeadline()) return work
  return within(work, remainingMs(), 'deadline', onExceeded).catch((err: unknown) => {
    if ((err as { code?: unknown } | null)?.code === '57014') onExceeded('statement_timeout')
    throw err
  })
}

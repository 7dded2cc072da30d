// postgres.js client factory. One pool per process; PGlite accepts a single connection.
import postgres from 'postgres'

export type Sql = postgres.Sql<Record<string, never>>
export type TransactionSql = postgres.TransactionSql<Record<string, never>>
/** A connection of the pool held by one caller until `release()`. */
export type ReservedSql = postgres.ReservedSql<Record<string, never>>
/** Where statements run: the pool, a reserved connection or a postgres.js transaction. */
export type Db = Sql | ReservedSql | TransactionSql

export interface ClientOptions {
  max?: number
  /** seconds; bounded so that a dead database answers 503 quickly instead of hanging */
  connectTimeout?: number
  /** ms; each statement's server-side statement_timeout (DATABASE_STATEMENT_TIMEOUT_MS) */
  statementTimeoutMs?: number
}

/**
 * Seconds before the pool's next connection attempt after `retries` failed ones: 50 ms doubling
 * to at most 0.5 s. The driver's default grows to 20 s, and queued queries wait with it, so the
 * first request after a failover would wait long after the new primary is up.
 */
export const reconnectBackoff = (retries: number): number => Math.min(0.05 * 2 ** retries, 0.5)

export function createClient(url: string, options: ClientOptions = {}): Sql {
  return postgres(url, {
    max: options.max ?? 10,
    connect_timeout: options.connectTimeout ?? 5,
    idle_timeout: 60,
    max_lifetime: 60 * 30,
    backoff: reconnectBackoff,
    prepare: true,
    onnotice: () => {},
    // Never let the driver print queries or parameters anywhere.
    debug: false,
    // jit off: the service's statements are short, and on the one analytic query (telemetry
    // metrics over 1M events) compiling took longer than it saved (30-50 ms, measured).
    connection: {
      application_name: 'study-service',
      statement_timeout: options.statementTimeoutMs ?? 15_000,
      jit: 'off',
    },
  }) as Sql
}

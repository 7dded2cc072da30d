// Reads and checks the environment once; a bad value stops the start with one clear line.
import { getHeapStatistics } from 'node:v8'
// The one module of the service it imports is the format of its key file (a leaf: no state).
import { checkSecretsDistinct, type KeyFileEntry, KeyFileError, readKeyFile } from './auth/key-file.js'

/** The longest KPI window (GET .../metrics?window_minutes=10080): telemetry retention may not be shorter. */
export const LONGEST_KPI_WINDOW_DAYS = 7

export type AppEnv = 'dev' | 'qa' | 'prod'

export interface Config {
  port: number
  host: string
  databaseUrl: string | null
  /** DATABASE_EMBEDDED=1: qa or prod may run on the embedded database (dev does without asking). */
  databaseEmbedded: boolean
  /** PostgreSQL connections of the pool (DATABASE_POOL_MAX); one more listens for key changes. */
  databasePoolMax: number
  /** A request's database deadlines; see src/db/deadline.ts. */
  databaseDeadlines: {
    /** DATABASE_CONNECTION_WAIT_MS: the longest a request waits for a connection of its own. */
    connectionWaitMs: number
    /** DATABASE_STATEMENT_TIMEOUT_MS: each statement's statement_timeout. */
    statementTimeoutMs: number
  }
  /** Learner exports: how many may hold a connection at once, and how long a stalled reader keeps one. */
  export: {
    /** EXPORT_MAX_CONNECTIONS: connections exports may hold at once (fewer than the pool's). */
    maxConnections: number
    /** EXPORT_WRITE_TIMEOUT_MS: an export whose reader takes nothing for this long is cut. */
    writeTimeoutMs: number
  }
  /** Plain secrets from API_KEYS: full-access keys. */
  apiKeys: string[]
  /** Entries of API_KEYS_FILE (ids, SHA-256 secrets, scopes, systems, rate limits, expiry). */
  apiKeyEntries: KeyFileEntry[]
  appEnv: AppEnv
  rateLimitMax: number
  rateLimitWindowMs: number
  /** Shared rate-limit windows in Redis (several replicas); null keeps them in process memory. */
  redisUrl: string | null
  /** A Redis decision slower than this is taken in the local window instead. */
  redisCommandTimeoutMs: number
  bodyLimitBytes: number
  /** Bytes of request bodies in flight at once, across requests (0: no cap); see src/http/body-budget.ts. */
  bodyBytesInFlightMax: number
  /** What one client (API key, or address without one) may hold at once; see src/http/client-holdings.ts. */
  client: {
    /** Requests in progress (CLIENT_MAX_CONCURRENT_REQUESTS); a key's max_concurrent_requests replaces it. */
    maxConcurrentRequests: number
    /** Request-body bytes in flight (CLIENT_MAX_BODY_BYTES_IN_FLIGHT); a key's max_body_bytes_in_flight replaces it. */
    maxBodyBytesInFlight: number
    /** The most a key's max_body_bytes_in_flight may be: half of BODY_BYTES_IN_FLIGHT_MAX (one body at least). */
    maxBodyBytesInFlightShare: number
  }
  /** A body slower than this after the grace is cut with 408 (0: no minimum); see src/http/upload-rate.ts. */
  minUploadBytesPerSecond: number
  minUploadGraceMs: number
  idempotencyTtlHours: number
  /** Days docs-search events are kept (TELEMETRY_RETENTION_DAYS); at least the longest KPI window. */
  telemetryRetentionDays: number
  /** Distinct sessions a query needs before analytics list its text (TELEMETRY_MIN_SESSIONS). */
  telemetryMinSessions: number
  /** How often the docs-search analytics rollup is refreshed (ANALYTICS_REFRESH_INTERVAL_MS): its answers are at most about that old. */
  analyticsRefreshIntervalMs: number
  logLevel: string
  corsOrigins: string[]
  dataDir: string
  /** A request's headers and body must arrive within this time, else 408 (REQUEST_TIMEOUT_MS). */
  requestTimeoutMs: number
  /** CONTRACT_STATES=1: the Pact provider-state route for contract tests (dev or qa only). */
  contractStates: boolean
  /** Load shedding thresholds (0 turns a check off); see src/plugins/external/load-shedding.ts. */
  loadShed: {
    maxEventLoopDelayMs: number
    maxEventLoopUtilization: number
    maxHeapUsedBytes: number
    maxRssBytes: number
    retryAfterSeconds: number
    /** Best-effort traffic (telemetry ingest) sheds at this fraction of the thresholds. */
    bestEffortFraction: number
  }
}

export class ConfigError extends Error {}

/** The key used when APP_ENV=dev and API_KEYS is empty; documented in the README. */
export const DEV_API_KEY = 'dev-key-change-me'

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${raw}"`)
  }
  return value
}

function fraction(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value < 0 || value > 1)
    throw new ConfigError(`${name} must be a number from 0 to 1, got "${raw}"`)
  return value
}

/** A switch: unset, "0" or "1". */
function flag(env: NodeJS.ProcessEnv, name: string): boolean {
  const raw = env[name]
  if (raw && !['0', '1'].includes(raw)) throw new ConfigError(`${name} must be 0 or 1, got "${raw}"`)
  return raw === '1'
}

function list(raw: string | undefined): string[] {
  return (raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const appEnv = (env.APP_ENV || 'dev') as AppEnv
  if (!['dev', 'qa', 'prod'].includes(appEnv)) {
    throw new ConfigError(`APP_ENV must be one of dev, qa, prod, got "${env.APP_ENV}"`)
  }
  const apiKeys = list(env.API_KEYS)
  let apiKeyEntries: KeyFileEntry[] = []
  try {
    if (env.API_KEYS_FILE) apiKeyEntries = readKeyFile(env.API_KEYS_FILE)
    checkSecretsDistinct(apiKeys, apiKeyEntries)
  } catch (err) {
    if (err instanceof KeyFileError) throw new ConfigError(err.message)
    throw err
  }
  if (apiKeys.length === 0 && apiKeyEntries.length === 0 && appEnv !== 'dev') {
    throw new ConfigError(
      `API_KEYS is required when APP_ENV=${appEnv} (comma-separated keys), or API_KEYS_FILE (a JSON file of key entries)`,
    )
  }
  // The provider-state route writes data with a full-access key: never in production.
  const contractStates = flag(env, 'CONTRACT_STATES')
  if (contractStates && appEnv === 'prod')
    throw new ConfigError('CONTRACT_STATES=1 is for contract tests only and refused with APP_ENV=prod')
  if (contractStates && apiKeys.length === 0 && appEnv !== 'dev')
    throw new ConfigError('CONTRACT_STATES=1 needs a full-access key in API_KEYS')
  const logLevel = env.LOG_LEVEL || 'info'
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`)
  }
  const databaseUrl = env.DATABASE_URL || null
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must be a postgres:// or postgresql:// URL')
  }
  const databaseEmbedded = flag(env, 'DATABASE_EMBEDDED')
  if (databaseUrl && databaseEmbedded)
    throw new ConfigError('DATABASE_EMBEDDED=1 and DATABASE_URL exclude each other: set one of them')
  // The embedded database lives in a local folder (in a container, one that goes with it): qa and
  // prod never fall back to it by accident.
  if (!databaseUrl && !databaseEmbedded && appEnv !== 'dev')
    throw new ConfigError(
      `DATABASE_URL is required when APP_ENV=${appEnv} (a postgres:// URL), or DATABASE_EMBEDDED=1 for the embedded database in PGLITE_DATA_DIR`,
    )
  const redisUrl = env.REDIS_URL || null
  if (redisUrl && !/^rediss?:\/\//.test(redisUrl)) {
    throw new ConfigError('REDIS_URL must be a redis:// or rediss:// URL')
  }
  const bodyLimitBytes = integer(env, 'BODY_LIMIT_BYTES', 1_048_576, 1024, 1_073_741_824)
  const bodyBytesInFlightMax = integer(env, 'BODY_BYTES_IN_FLIGHT_MAX', 32 * 1_048_576, 0, Number.MAX_SAFE_INTEGER)
  if (bodyBytesInFlightMax !== 0 && bodyBytesInFlightMax < bodyLimitBytes) {
    throw new ConfigError(
      `BODY_BYTES_IN_FLIGHT_MAX must be 0 or at least BODY_LIMIT_BYTES (${bodyLimitBytes}), got "${env.BODY_BYTES_IN_FLIGHT_MAX}"`,
    )
  }
  // A client's share of the process-wide budget: at most half of it (one body at least), so one
  // key never holds what every other partner needs.
  const clientShareMax = Math.max(
    bodyLimitBytes,
    bodyBytesInFlightMax === 0 ? Number.MAX_SAFE_INTEGER : Math.floor(bodyBytesInFlightMax / 2),
  )
  const clientShareDefault = Math.max(
    bodyLimitBytes,
    bodyBytesInFlightMax === 0 ? 4 * bodyLimitBytes : Math.floor(bodyBytesInFlightMax / 8),
  )
  const clientShareRange = `from BODY_LIMIT_BYTES (${bodyLimitBytes}) to half of BODY_BYTES_IN_FLIGHT_MAX (${clientShareMax})`
  const client = {
    maxConcurrentRequests: integer(env, 'CLIENT_MAX_CONCURRENT_REQUESTS', 64, 1, 100_000),
    maxBodyBytesInFlight: integer(
      env,
      'CLIENT_MAX_BODY_BYTES_IN_FLIGHT',
      Math.min(clientShareDefault, clientShareMax),
      bodyLimitBytes,
      clientShareMax,
    ),
    maxBodyBytesInFlightShare: clientShareMax,
  }
  for (const entry of apiKeyEntries) {
    const bytes = entry.maxBodyBytesInFlight
    if (bytes !== null && (bytes < bodyLimitBytes || bytes > clientShareMax))
      throw new ConfigError(
        `API_KEYS_FILE: id "${entry.id}": "max_body_bytes_in_flight" must be ${clientShareRange}, got ${bytes}`,
      )
  }
  const telemetryRetentionDays = integer(env, 'TELEMETRY_RETENTION_DAYS', 30, 1, 36_500)
  if (telemetryRetentionDays < LONGEST_KPI_WINDOW_DAYS) {
    throw new ConfigError(
      `TELEMETRY_RETENTION_DAYS must be at least ${LONGEST_KPI_WINDOW_DAYS} (the longest KPI window), got "${env.TELEMETRY_RETENTION_DAYS}"`,
    )
  }
  const databasePoolMax = integer(env, 'DATABASE_POOL_MAX', 10, 1, 1000)
  // Exports stream for as long as their reader reads: they may hold at most this many of the
  // pool's connections, always fewer than all of them (none on a pool of one: PGlite).
  const exportMaxConnections = integer(env, 'EXPORT_MAX_CONNECTIONS', Math.min(2, databasePoolMax - 1), 0, 1000)
  if (databasePoolMax > 1 && (exportMaxConnections < 1 || exportMaxConnections >= databasePoolMax))
    throw new ConfigError(
      `EXPORT_MAX_CONNECTIONS must be from 1 to DATABASE_POOL_MAX - 1 (${databasePoolMax - 1}), got "${env.EXPORT_MAX_CONNECTIONS}"`,
    )
  return {
    port: integer(env, 'PORT', 3000, 0, 65535),
    host: env.HOST || '127.0.0.1',
    databaseUrl,
    databaseEmbedded,
    // Per replica: replicas × (this + 1, the key-change listener) must stay under PostgreSQL's max_connections (PGlite: 1).
    databasePoolMax,
    databaseDeadlines: {
      // Long enough to ride out a failover's gap (about 1.2 s measured with the bounded
      // reconnect backoff), short enough that a caller hears 503 before its own timeout.
      connectionWaitMs: integer(env, 'DATABASE_CONNECTION_WAIT_MS', 2000, 1, 600_000),
      // The service's statements take milliseconds; the slowest (telemetry KPIs over a week)
      // tens of them.
      statementTimeoutMs: integer(env, 'DATABASE_STATEMENT_TIMEOUT_MS', 5000, 1, 600_000),
    },
    export: {
      maxConnections: Math.max(1, exportMaxConnections),
      writeTimeoutMs: integer(env, 'EXPORT_WRITE_TIMEOUT_MS', 10_000, 100, 600_000),
    },
    // The development key only when no key is configured at all (APP_ENV=dev).
    apiKeys: apiKeys.length > 0 || apiKeyEntries.length > 0 ? apiKeys : [DEV_API_KEY],
    apiKeyEntries,
    appEnv,
    rateLimitMax: integer(env, 'RATE_LIMIT_MAX', 1000, 1, 10_000_000),
    rateLimitWindowMs: integer(env, 'RATE_LIMIT_WINDOW_MS', 60_000, 1, 86_400_000),
    redisUrl,
    redisCommandTimeoutMs: integer(env, 'REDIS_COMMAND_TIMEOUT_MS', 50, 1, 10_000),
    bodyLimitBytes,
    // Thirty-two bodies of the largest size at once: a trickling flood pins no more than this.
    bodyBytesInFlightMax,
    client,
    // Apache's mod_reqtimeout takes 500 bytes/s after 20 s; a partner's 1 MiB at 1 KiB/s would
    // take 17 minutes, so this cuts only uploads that are held open on purpose.
    minUploadBytesPerSecond: integer(env, 'REQUEST_BODY_MIN_BYTES_PER_SECOND', 1024, 0, 1_073_741_824),
    minUploadGraceMs: integer(env, 'REQUEST_BODY_GRACE_MS', 5000, 0, 600_000),
    idempotencyTtlHours: integer(env, 'IDEMPOTENCY_TTL_HOURS', 24, 1, 8760),
    telemetryRetentionDays,
    telemetryMinSessions: integer(env, 'TELEMETRY_MIN_SESSIONS', 2, 1, 1_000_000),
    analyticsRefreshIntervalMs: integer(env, 'ANALYTICS_REFRESH_INTERVAL_MS', 60_000, 100, 3_600_000),
    logLevel,
    corsOrigins: list(env.CORS_ORIGINS),
    dataDir: env.PGLITE_DATA_DIR || '.data/pglite',
    requestTimeoutMs: integer(env, 'REQUEST_TIMEOUT_MS', 30_000, 1000, 600_000),
    contractStates,
    loadShed: {
      // A saturated process with bounded concurrency (many clients posting large batches) holds
      // its loop a few hundred ms late at full throughput: that is a queue, not a collapse.
      maxEventLoopDelayMs: integer(env, 'LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS', 1000, 0, 60_000),
      // Off by default: a process that is merely busy sits near 1.0 without being late.
      maxEventLoopUtilization: fraction(env, 'LOAD_SHED_MAX_EVENT_LOOP_UTILIZATION', 0),
      // Default: 90 % of V8's heap limit, before the process would die of it.
      maxHeapUsedBytes: integer(
        env,
        'LOAD_SHED_MAX_HEAP_USED_BYTES',
        Math.floor(getHeapStatistics().heap_size_limit * 0.9),
        0,
        Number.MAX_SAFE_INTEGER,
      ),
      maxRssBytes: integer(env, 'LOAD_SHED_MAX_RSS_BYTES', 0, 0, Number.MAX_SAFE_INTEGER),
      retryAfterSeconds: integer(env, 'LOAD_SHED_RETRY_AFTER_SECONDS', 2, 1, 3600),
      bestEffortFraction: fraction(env, 'LOAD_SHED_BEST_EFFORT_FRACTION', 0.5),
    },
  }
}

/**
 * Warnings the start logs once, each one line: the development key accepted, or turned off by an
 * API_KEYS_FILE that a developer may not know replaces it.
 */
export function startupWarnings(config: Config): string[] {
  if (config.apiKeys.includes(DEV_API_KEY))
    return [`API_KEYS is not set: APP_ENV=dev accepts the development key "${DEV_API_KEY}"`]
  if (config.appEnv === 'dev' && config.apiKeys.length === 0 && config.apiKeyEntries.length > 0)
    return [
      `API_KEYS_FILE is set and API_KEYS is not: the development key "${DEV_API_KEY}" is not accepted, only the file's keys`,
    ]
  return []
}

// All repositories over one executor (the pool or a transaction), and the idempotent writes over
// the pool. Their statements are timed for db_operation_duration_seconds from postgres.js's
// diagnostics channel (src/plugins/app/database.ts).
import type { Db } from '../db/client.js'
import { bounded, type DeadlineReason } from '../db/deadline.js'
import type { AnswerStore } from '../idempotency/index.js'
import { createApiKeyRepository, createApiKeyWrites } from './api-keys.js'
import { createConspectusRepository, createConspectusWrites } from './conspectuses.js'
import { createErrorLogRepository, createErrorLogWrites } from './error-logs.js'
import { createLearnerRepository } from './learners.js'
import { createTelemetryRepository, createTelemetryWrites } from './telemetry.js'
import { createTelemetryAnalyticsRepository } from './telemetry-analytics.js'
import { createUserRepository, createUserWrites } from './users.js'

/** Records one statement's duration under its name (`SELECT users`) in db_operation_duration_seconds. */
export type ObserveDbOperation = (operation: string, seconds: number) => void

/**
 * A repository whose calls end by the current request's database deadline (src/db/deadline.ts);
 * outside a request each call is the repository's own.
 */
function withinDeadline<T extends Record<string, (...args: never[]) => Promise<unknown>>>(
  repository: T,
  onExceeded: (reason: DeadlineReason) => void,
): T {
  const bound = {} as Record<string, unknown>
  for (const [fn, impl] of Object.entries(repository))
    bound[fn] = (...args: never[]) => bounded(impl(...args), onExceeded)
  return bound as T
}

const factories = {
  users: createUserRepository,
  conspectuses: createConspectusRepository,
  errorLogs: createErrorLogRepository,
  learners: createLearnerRepository,
  telemetry: createTelemetryRepository,
  telemetryAnalytics: createTelemetryAnalyticsRepository,
  apiKeys: createApiKeyRepository,
}

export type Repositories = { [Name in keyof typeof factories]: ReturnType<(typeof factories)[Name]> }

/**
 * Repositories over `db`, plain objects built at once (a transaction's too: a few closures each,
 * nothing next to its round trips); with `onDeadline`, each call ends by the current request's
 * database deadline (a transaction's are not bounded one by one: the transaction is, as a whole).
 */
export function createRepositories(db: Db, onDeadline?: (reason: DeadlineReason) => void): Repositories {
  const built: Record<string, Record<string, (...args: never[]) => Promise<unknown>>> = {}
  for (const [name, make] of Object.entries(factories)) {
    const repository = make(db) as Record<string, (...args: never[]) => Promise<unknown>>
    built[name] = onDeadline ? withinDeadline(repository, onDeadline) : repository
  }
  return built as unknown as Repositories
}

/**
 * The idempotent writes, one method per operation, each in the module with its SQL: it takes the
 * request's key (src/idempotency/request.ts) and what the operation writes, and resolves to the
 * answer (src/http/send-answer.ts sends it). Each bounds its own statements by the request's
 * deadline (AnswerStore.inTime, src/idempotency/store.ts).
 */
export function createWrites(db: AnswerStore) {
  return {
    users: createUserWrites(db),
    conspectuses: createConspectusWrites(db),
    errorLogs: createErrorLogWrites(db),
    apiKeys: createApiKeyWrites(db),
    telemetry: createTelemetryWrites(db),
  }
}

export type Writes = ReturnType<typeof createWrites>

// All repositories over one executor (the pool or a transaction). Their statements are timed
// for db_operation_duration_seconds from postgres.js's diagnostics channel (src/plugins/app/database.ts).
import type { Db } from '../db/client.js'
import { createApiKeyRepository } from './api-keys.js'
import { createConspectusRepository } from './conspectuses.js'
import { createErrorLogRepository } from './error-logs.js'
import { createLearnerRepository } from './learners.js'
import { createTelemetryRepository } from './telemetry.js'
import { createTelemetryAnalyticsRepository } from './telemetry-analytics.js'
import { createUserRepository } from './users.js'

/** Records one statement's duration under its name (`SELECT users`) in db_operation_duration_seconds. */
export type ObserveDbOperation = (operation: string, seconds: number) => void

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

/** Repositories over `db`, each built on first use: a transaction pays only for those it touches. */
class LazyRepositories {
  readonly #built: Partial<Repositories> = {}
  constructor(readonly db: Db) {}

  #get<Name extends keyof Repositories>(name: Name): Repositories[Name] {
    const built = this.#built[name] ?? (factories[name](this.db) as Repositories[Name])
    this.#built[name] = built
    return built
  }
  get users() {
    return this.#get('users')
  }
  get conspectuses() {
    return this.#get('conspectuses')
  }
  get errorLogs() {
    return this.#get('errorLogs')
  }
  get learners() {
    return this.#get('learners')
  }
  get telemetry() {
    return this.#get('telemetry')
  }
  get telemetryAnalytics() {
    return this.#get('telemetryAnalytics')
  }
  get apiKeys() {
    return this.#get('apiKeys')
  }
}

export function createRepositories(db: Db): Repositories {
  return new LazyRepositories(db)
}

// All repositories over one executor (the pool or a transaction), each call timed for
// db_operation_duration_seconds under the label `<repository>.<function>`.
import type { Db } from '../db/client.js'
import { bounded } from '../db/deadline.js'
import type { PoolUsage } from '../db/pool-usage.js'
import { createApiKeyRepository } from './api-keys.js'
import { createConspectusRepository } from './conspectuses.js'
import { createErrorLogRepository } from './error-logs.js'
import { createLearnerRepository } from './learners.js'
import { createTelemetryRepository } from './telemetry.js'
import { createTelemetryAnalyticsRepository } from './telemetry-analytics.js'
import { createUserRepository } from './users.js'

export type ObserveDbOperation = (operation: string, seconds: number) => void

/** Each repository's functions with their operation labels, listed on its first build (a factory's functions are fixed). */
const operationsOf = new Map<string, [fn: string, operation: string][]>()

function instrument<T extends Record<string, (...args: never[]) => Promise<unknown>>>(
  name: string,
  repository: T,
  observe: ObserveDbOperation,
  usage: PoolUsage | undefined,
): T {
  let operations = operationsOf.get(name)
  if (operations === undefined) {
    operations = Object.keys(repository).map((fn) => [fn, `${name}.${fn}`])
    operationsOf.set(name, operations)
  }
  const timed = {} as Record<string, unknown>
  for (const [fn, operation] of operations) {
    const impl = repository[fn]!
    timed[fn] = async (...args: never[]) => {
      const start = performance.now()
      if (usage) usage.inFlight++
      try {
        // Within the request's database deadline, when a request made the call.
        return await (usage ? bounded(impl(...args), usage.countDeadline) : impl(...args))
      } finally {
        if (usage) usage.inFlight--
        observe(operation, (performance.now() - start) / 1000)
      }
    }
  }
  return timed as T
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

/** Repositories over `db`, each built on first use: a transaction pays only for those it touches. */
class LazyRepositories {
  readonly #built: Partial<Repositories> = {}
  constructor(
    readonly db: Db,
    readonly observe: ObserveDbOperation,
    readonly usage?: PoolUsage,
  ) {}

  #get<Name extends keyof Repositories>(name: Name): Repositories[Name] {
    const built =
      this.#built[name] ?? (instrument(name, factories[name](this.db), this.observe, this.usage) as Repositories[Name])
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

export function createRepositories(db: Db, observe: ObserveDbOperation, usage?: PoolUsage): Repositories {
  return new LazyRepositories(db, observe, usage)
}

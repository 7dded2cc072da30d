// All repositories over one executor (the pool or a transaction), each call timed for
// db_operation_duration_seconds under the label `<repository>.<function>`.
import type { Db } from '../db/client.js'
import { createConspectusRepository } from './conspectuses.js'
import { createErrorLogRepository } from './error-logs.js'
import { createIdempotencyRepository } from './idempotency.js'
import { createTelemetryRepository } from './telemetry.js'
import { createUserRepository } from './users.js'

export type ObserveDbOperation = (operation: string, seconds: number) => void

function instrument<T extends Record<string, (...args: never[]) => Promise<unknown>>>(
  name: string,
  repository: T,
  observe: ObserveDbOperation,
): T {
  const timed = {} as Record<string, unknown>
  for (const [fn, impl] of Object.entries(repository)) {
    const operation = `${name}.${fn}`
    timed[fn] = async (...args: never[]) => {
      const start = process.hrtime.bigint()
      try {
        return await impl(...args)
      } finally {
        observe(operation, Number(process.hrtime.bigint() - start) / 1e9)
      }
    }
  }
  return timed as T
}

export function createRepositories(db: Db, observe: ObserveDbOperation) {
  return {
    users: instrument('users', createUserRepository(db), observe),
    idempotency: instrument('idempotency', createIdempotencyRepository(db), observe),
    conspectuses: instrument('conspectuses', createConspectusRepository(db), observe),
    errorLogs: instrument('errorLogs', createErrorLogRepository(db), observe),
    telemetry: instrument('telemetry', createTelemetryRepository(db), observe),
  }
}

export type Repositories = ReturnType<typeof createRepositories>

// Request and reply types of each operation, derived from the generated contract types.
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { components, operations } from '../generated/api.js'
import type { ApiKeyRegistry } from '../src/auth/api-keys.js'
import type { StoredKeySync } from '../src/auth/stored-key-sync.js'
import type { Config } from '../src/config.js'
import type { Sql } from '../src/db/client.js'
import type { AnswerIdempotently } from '../src/idempotency/index.js'
import type { Repositories } from '../src/repositories/index.js'

export type Schemas = components['schemas']
export type OperationName = keyof operations

type Json<T> = T extends { content: { 'application/json': infer B } } ? B : never
export type RequestBody<Op extends OperationName> = operations[Op] extends { requestBody: infer R } ? Json<R> : never
export type PathParams<Op extends OperationName> = operations[Op]['parameters'] extends { path: infer P } ? P : never
export type QueryParams<Op extends OperationName> = operations[Op]['parameters'] extends { query?: infer Q }
  ? NonNullable<Q>
  : never
export type SuccessBody<Op extends OperationName, S extends keyof operations[Op]['responses']> = Json<
  operations[Op]['responses'][S]
>

export type OperationRequest<Op extends OperationName> = FastifyRequest<{
  Body: RequestBody<Op>
  Params: PathParams<Op>
  Querystring: QueryParams<Op>
}>
export type OperationHandler<Op extends OperationName> = (
  request: OperationRequest<Op>,
  reply: FastifyReply,
) => Promise<unknown>
export type ServiceHandlers<Ops extends OperationName> = { [Op in Ops]: OperationHandler<Op> }

/** What the handlers need of the database: the pool (for the readiness probe) and repositories over it. */
export interface HandlerDatabase {
  sql: Sql
  repos: Repositories
  /** Several statements as one transaction, with repositories bound to it. */
  transaction<R>(work: (tx: { repos: Repositories }) => Promise<R>): Promise<R>
}

export interface HandlerDeps {
  config: Pick<
    Config,
    'appEnv' | 'telemetryMinSessions' | 'bodyLimitBytes' | 'client' | 'rateLimitMax' | 'rateLimitWindowMs'
  >
  db: HandlerDatabase
  /** The key registry (configured ids) and the sync of stored keys (a change applies here at once). */
  apiKeys: { registry: Pick<ApiKeyRegistry, 'isConfiguredId'>; sync: Pick<StoredKeySync, 'changed'> }
  /**
   * Idempotent writes: the one entry point (scope, key id and Idempotency-Key come from the
   * request); the work runs in a transaction and gets repositories bound to it.
   */
  answerIdempotently: AnswerIdempotently<{ repos: Repositories }>
  /** The clock for schedule decisions and timestamps (tests pass a fixed one). */
  now: () => Date
  /** True once shutdown has begun (readiness turns not_ready). */
  isDraining: () => boolean
  /** True while the process is overloaded and sheds load (readiness turns not_ready). */
  isUnderPressure: () => boolean
  /** Asks for a refresh of the analytics rollup now, without waiting for it (after an erasure). */
  refreshAnalytics: () => void
}

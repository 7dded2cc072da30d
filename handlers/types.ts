// Request and reply types of each operation, derived from the generated contract types.
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { components, operations } from '../generated/api.js'
import type { ApiKeyRegistry } from '../src/auth/api-keys.js'
import type { StoredKeySync } from '../src/auth/stored-key-sync.js'
import type { Config } from '../src/config.js'
import type { Repositories, Writes } from '../src/repositories/index.js'
import type { ExportPool } from '../src/repositories/learner-export.js'

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

/** What the handlers need of the database: repositories over the pool, its transactions and a check of it. */
export interface HandlerDatabase {
  repos: Repositories
  /** The pool as learner exports take it (their bounded share of its connections). */
  exportPool: ExportPool
  /** Several statements as one transaction, with repositories bound to it. */
  transaction<R>(work: (tx: { repos: Repositories }) => Promise<R>): Promise<R>
  /** One trivial statement (the readiness probe). */
  ping(): Promise<void>
}

export interface HandlerDeps {
  config: Pick<
    Config,
    'appEnv' | 'telemetryMinSessions' | 'bodyLimitBytes' | 'client' | 'rateLimitMax' | 'rateLimitWindowMs' | 'export'
  >
  db: HandlerDatabase
  /** The key registry (configured ids) and the sync of stored keys (a change applies here at once). */
  apiKeys: { registry: Pick<ApiKeyRegistry, 'isConfiguredId'>; sync: Pick<StoredKeySync, 'changed'> }
  /**
   * The idempotent writes (src/repositories/): each takes the request's key
   * (idempotentRequest) and resolves to the answer, which sendAnswer sends.
   */
  writes: Writes
  /** The clock for schedule decisions and timestamps (tests pass a fixed one). */
  now: () => Date
  /** True once shutdown has begun (readiness turns not_ready). */
  isDraining: () => boolean
  /** True while the process is overloaded and sheds load (readiness turns not_ready). */
  isUnderPressure: () => boolean
  /** Asks for a refresh of the analytics rollup now, without waiting for it (after an erasure). */
  refreshAnalytics: () => void
}

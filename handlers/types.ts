// Request and reply types of each operation, derived from the generated contract types.
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { components, operations } from '../generated/api.js'
import type { Config } from '../src/config.js'
import type { Database } from '../src/plugins/database.js'
import type { IdempotentWrite, WriteResult } from '../src/idempotency/idempotent-write.js'
import type { Repositories } from '../src/repositories/index.js'

export type Schemas = components['schemas']
export type OperationName = keyof operations

type Json<T> = T extends { content: { 'application/json': infer B } } ? B : never
export type RequestBody<Op extends OperationName> = operations[Op] extends { requestBody: infer R } ? Json<R> : never
export type PathParams<Op extends OperationName> = operations[Op]['parameters'] extends { path: infer P } ? P : never
export type QueryParams<Op extends OperationName> = operations[Op]['parameters'] extends { query?: infer Q } ? NonNullable<Q> : never
export type SuccessBody<Op extends OperationName, S extends keyof operations[Op]['responses']> = Json<operations[Op]['responses'][S]>

export type OperationRequest<Op extends OperationName> = FastifyRequest<{
  Body: RequestBody<Op>
  Params: PathParams<Op>
  Querystring: QueryParams<Op>
}>
export type OperationHandler<Op extends OperationName> = (request: OperationRequest<Op>, reply: FastifyReply) => Promise<unknown>
export type ServiceHandlers<Ops extends OperationName> = { [Op in Ops]: OperationHandler<Op> }

export interface HandlerDeps {
  config: Config
  db: Database
  idempotentWrite: IdempotentWrite
  /** The clock for schedule decisions and timestamps (tests pass a fixed one). */
  now: () => Date
  /** True once shutdown has begun (readiness turns not_ready). */
  isDraining: () => boolean
  /** True while the process is overloaded and sheds load (readiness turns not_ready). */
  isUnderPressure: () => boolean
}

/**
 * Runs the request's idempotent write (its Idempotency-Key, its body) and sends the answer. The
 * answer is serialized by the route's own response serializer and stored as that text, so the
 * first answer and every replay are the same bytes; replays are marked.
 */
export async function answerIdempotently<T>(
  idempotentWrite: IdempotentWrite,
  request: FastifyRequest,
  reply: FastifyReply,
  scope: string,
  work: (repos: Repositories) => Promise<WriteResult<T>>,
): Promise<string> {
  const serialize = (status: number, body: unknown) =>
    reply.serializeInput(body as Record<string, unknown>, String(status), 'application/json') as string
  const outcome = await idempotentWrite(scope, request.headers['idempotency-key'], request.body, serialize, work)
  // Already JSON text with its content type: Fastify sends it as it is.
  reply.code(outcome.status).type('application/json; charset=utf-8')
  if (outcome.replayed) reply.header('idempotent-replayed', 'true')
  return outcome.json
}

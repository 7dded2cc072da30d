import fp from 'fastify-plugin'
import type { onRequestHookHandler, preHandlerHookHandler, RouteOptions } from 'fastify'
import { operations, type OperationId, type OperationInfo } from '../../../generated/operations.js'
import { appError } from '../../errors.js'
import { requireScope } from '../../auth/scope.js'
import { checkSystems } from '../../auth/systems.js'
import { IDEMPOTENCY_KEY_HEADER, requireIdempotencyKey } from '../../idempotency/key.js'
import { createRouteValidatorCompiler } from '../../validation/validator-compiler.js'

/**
 * The order of checks on a request, for every operation of the contract, in one place.
 *
 *   onRequest (before the body is read), on operations behind a security requirement
 *     1. rate limit            429 COMMON_429
 *     2. load shedding         503 COMMON_503   (after 1, so that the answer carries the limit headers)
 *     3. API key               401 COMMON_401
 *     4. scope                 403 COMMON_403   the operation's scope, from its security requirement
 *     5. body budget           503 COMMON_503   operations with a body: its bytes reserved before it
 *                                               is read (BODY_BYTES_IN_FLIGHT_MAX, src/http/body-budget.ts)
 *   Fastify reads and parses the body
 *     6. body size             413 COMMON_413
 *     7. content type          415 COMMON_415
 *   Fastify validates with the operation's generated validators
 *     8. path, query, headers, body   422
 *   preHandler
 *     9. systems               403 COMMON_403   operations whose request names a system_uuid
 *    10. Idempotency-Key       400 COMMON_400   operations that declare the header
 *   handler (handlers/, through src/idempotency)
 *    11. replay or 409, then business rules
 *
 * Which stages an operation gets comes from generated/operations.ts, i.e. from the spec:
 * its `security` requirement and its parameters. Routes that are not operations of the spec
 * (/docs assets) get none.
 */
export interface OperationStages {
  onRequest: onRequestHookHandler[]
  preHandler: preHandlerHookHandler[]
}

export default fp(
  async (fastify) => {
    const rateLimit = fastify.rateLimitHook
    // Callback hooks: no promise per request.
    const overloaded = () =>
      appError('SERVICE_OVERLOADED', { 'retry-after': String(fastify.config.loadShed.retryAfterSeconds) })
    const shedLoad: onRequestHookHandler = (_request, _reply, done) => {
      done(fastify.overloaded() ? overloaded() : undefined)
    }
    const requireApiKey: onRequestHookHandler = (request, _reply, done) => {
      done(request.apiKeyId === null ? appError('SECURITY_AUTH_REQUIRED') : undefined)
    }
    // After the key check: a caller without a key is refused unread and reserves nothing.
    const reserveBody: onRequestHookHandler = (request, reply, done) => {
      done(fastify.bodyBudget.reserve(request.raw, reply.raw) ? undefined : overloaded())
    }

    function stagesFor(op: OperationInfo): OperationStages {
      const onRequest: onRequestHookHandler[] = []
      const preHandler: preHandlerHookHandler[] = []
      if (!op.public) onRequest.push(rateLimit, shedLoad, requireApiKey, requireScope(op.scopes))
      if (!op.public && op.bodySchema !== null) onRequest.push(reserveBody)
      if (!op.public && op.systemUuidIn.length > 0) preHandler.push(checkSystems(op.systemUuidIn))
      if (op.idempotent) preHandler.push(requireIdempotencyKey)
      return { onRequest, preHandler }
    }

    const validatorCompiler = createRouteValidatorCompiler()
    fastify.addHook('onRoute', (route) => {
      const operationId = (route.schema as { operationId?: string } | undefined)?.operationId
      if (operationId === undefined) return
      const op = (operations as Record<string, OperationInfo>)[operationId]
      if (!op)
        throw new Error(
          `route ${route.method} ${route.url} names operation ${operationId}, which generated/operations.ts does not know: run make generate`,
        )
      const stages = stagesFor(op)
      route.onRequest = [...stages.onRequest, ...[route.onRequest ?? []].flat()]
      route.preHandler = [...[route.preHandler ?? []].flat(), ...stages.preHandler]
      if (op.idempotent) withoutHeader(route, IDEMPOTENCY_KEY_HEADER)
      route.validatorCompiler = validatorCompiler(operationId as OperationId)
    })
  },
  {
    name: 'request-pipeline',
    dependencies: ['config', 'auth', 'rate-limit', 'load-shedding', 'body-budget', 'json-only-bodies'],
  },
)

/** Takes a header out of the route's header schema: a pipeline stage checks it instead. */
function withoutHeader(route: RouteOptions, name: string) {
  const headers = (route.schema as { headers?: { properties?: Record<string, unknown>; required?: string[] } }).headers
  if (!headers) return
  const other = (key: string) => key.toLowerCase() !== name
  if (headers.properties)
    headers.properties = Object.fromEntries(Object.entries(headers.properties).filter(([key]) => other(key)))
  if (headers.required) headers.required = headers.required.filter(other)
}

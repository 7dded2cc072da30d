import fp from 'fastify-plugin'
import type { onRequestHookHandler, preHandlerHookHandler, preParsingHookHandler, RouteOptions } from 'fastify'
import { operations, type OperationId, type OperationInfo } from '../../../generated/operations.js'
import { appError } from '../../errors.js'
import { requireScope } from '../../auth/scope.js'
import { checkSystems } from '../../auth/systems.js'
import { checkOptionalIdempotencyKey, IDEMPOTENCY_KEY_HEADER, requireIdempotencyKey } from '../../idempotency/key.js'
import { createRouteValidatorCompiler } from '../../validation/validator-compiler.js'
import { createBodyBudget } from '../../http/body-budget.js'
import { createClientHoldings } from '../../http/client-holdings.js'
import { answerAsDeclared } from '../../http/error-answer.js'
import { createHoldStages } from '../../http/hold-stages.js'
import { shapeOperationSchema } from '../../http/operation-schema.js'
import { createUploadRateWatch } from '../../http/upload-rate.js'
import { registerHoldingGauges } from '../../metrics/holding-gauges.js'
import { prescanHookFor } from './json-body.js'

/**
 * The order of checks on a request, for every operation of the contract, in one place.
 * The served text (spec/openapi.yaml, "Order of checks") and README.md list the same numbered
 * stages with the same first status; test/platform/order-of-checks.test.ts reads each operation's
 * registered hooks (by name) from the built app and holds their order to that list, so a new stage
 * is a named hook, an item in the spec's list, the same item in the README, and a line here.
 * Before any of them, every request's key is identified (identifyKey, src/plugins/app/auth.ts):
 * it answers nothing, and the stages read it.
 *
 *   onRequest (before the body is read), on operations behind a security requirement
 *     1. rate limit            429 COMMON_429   SECURITY_RATE_LIMIT_EXCEEDED: requests per window, per client
 *     2. concurrent requests   429 COMMON_429   SECURITY_CONCURRENT_REQUESTS_EXCEEDED: the client's
 *                                               requests in progress (CLIENT_MAX_CONCURRENT_REQUESTS, a
 *                                               key's max_concurrent_requests; src/http/client-holdings.ts)
 *     3. load shedding         503 COMMON_503   SERVICE_OVERLOADED: by traffic class, see below (after 1 and
 *                                               2, so that the answer carries the limit headers)
 *     4. API key               401 COMMON_401   SECURITY_AUTH_REQUIRED
 *     5. scope                 403 COMMON_403   SECURITY_SCOPE_MISSING: the operation's scope
 *   operations with a body:
 *     6. content encoding      415 COMMON_415   UNSUPPORTED_CONTENT_ENCODING: any Content-Encoding but identity
 *     7. client's body bytes   429 COMMON_429   SECURITY_BODY_BYTES_IN_FLIGHT_EXCEEDED: its bodies in flight
 *                                               (CLIENT_MAX_BODY_BYTES_IN_FLIGHT, a key's max_body_bytes_in_flight)
 *     8. process body budget   503 COMMON_503   SERVICE_OVERLOADED: all bodies in flight
 *                                               (BODY_BYTES_IN_FLIGHT_MAX, src/http/body-budget.ts)
 *   Fastify reads and parses the body (src/plugins/app/json-body.ts)
 *     9. media type            415 COMMON_415   UNSUPPORTED_MEDIA_TYPE: no parser, refused unread
 *    10. upload rate           408 COMMON_408   REQUEST_BODY_TOO_SLOW: past REQUEST_BODY_GRACE_MS, slower than
 *                                               REQUEST_BODY_MIN_BYTES_PER_SECOND (src/http/upload-rate.ts)
 *    11. body size             413 COMMON_413   SECURITY_REQUEST_BODY_TOO_LARGE
 *    12. charset               415 COMMON_415   UNSUPPORTED_MEDIA_TYPE: a charset other than UTF-8
 *    13. capped values         422              free-form sizes and top-level array caps counted on the text
 *                                               as it arrives (the rest is then not read), depth and scalars
 *                                               checked at parse time (src/validation/body-prescan.ts)
 *   Fastify validates with the operation's generated validators
 *    14. path, query, headers, body   422       the field's code (src/validation/)
 *   preHandler
 *    15. systems               403 COMMON_403   SECURITY_SYSTEM_FORBIDDEN: operations naming a system_uuid
 *    16. Idempotency-Key       400 COMMON_400   operations that declare the header
 *   handler (handlers/, through src/idempotency)
 *    17. replay, or            409 COMMON_409   a stored answer replayed, or a conflicting one
 *    18. business rules
 *
 * The client is the request's API key (its id), or its address when it carries no valid key.
 * A stored key's request also counts against its partner's budget (stages 1, 2 and 7): the
 * limits of the partner's root key, held under the root's id, which the root's own requests
 * count against too. Whatever it holds (a request in progress, reserved body bytes) is given back when the
 * response closes: answered, aborted by the client, or cut by a timeout.
 *
 * Traffic classes, for load shedding (stage 3), in the order they shed:
 *   best-effort  operations that need only `telemetry:ingest` (docs-search events): shed from
 *                LOAD_SHED_BEST_EFFORT_FRACTION of a load-shedding threshold (default half)
 *   partner      every other operation behind a security requirement (partners' reads and
 *                writes): shed past a threshold
 *   probe        operations without a security requirement (/live, /ready): never shed
 *
 * Which stages an operation gets comes from generated/operations.ts, i.e. from the spec:
 * its `security` requirement and scopes, its parameters and body. Routes that are not
 * operations of the spec (/docs assets) get none.
 *
 * This file is the one place that shapes routes: its onRoute hook decides every route's options
 * once, when fastify-openapi-glue (or a plugin) makes the route: the stages above as the route's
 * own hooks (nothing per request tests whether a stage applies), the operation's validators and
 * schemas, and for every route how it answers methods it lacks (HEAD: 405).
 */
export interface OperationStages {
  onRequest: onRequestHookHandler[]
  preParsing: preParsingHookHandler[]
  preHandler: preHandlerHookHandler[]
}

export type TrafficClass = 'best-effort' | 'partner' | 'probe'

/** The class of an operation (see above): a rule on its security requirement and scopes. */
export function trafficClassOf(op: Pick<OperationInfo, 'public' | 'scopes'>): TrafficClass {
  if (op.public) return 'probe'
  return op.scopes.length > 0 && op.scopes.every((scope) => scope === 'telemetry:ingest') ? 'best-effort' : 'partner'
}

type Route = RouteOptions & { path?: string }

/** The operation a route of fastify-openapi-glue serves, or null for any other route. */
function operationOf(route: Route): [OperationId, OperationInfo] | null {
  const operationId = (route.schema as { operationId?: string } | undefined)?.operationId
  if (operationId === undefined) return null
  const op = (operations as Record<string, OperationInfo>)[operationId]
  if (!op)
    throw new Error(
      `route ${route.method} ${route.url} names operation ${operationId}, which generated/operations.ts does not know: run make generate`,
    )
  return [operationId as OperationId, op]
}

/** The route's hooks of a phase with `before` ahead of them and `after` behind. */
const around = <H>(own: H | H[] | undefined, before: H[], after: H[] = []): H[] => [
  ...before,
  ...(own === undefined ? [] : Array.isArray(own) ? own : [own]),
  ...after,
]

export default fp(
  async (fastify) => {
    const { config, serviceMetrics: metrics, loadShedding } = fastify
    const rateLimit = fastify.rateLimitHook

    // What requests hold until their responses close, and the gauges that show it.
    const budget = createBodyBudget(config.bodyBytesInFlightMax)
    const holdings = createClientHoldings()
    const uploadRate = createUploadRateWatch(config.minUploadBytesPerSecond, config.minUploadGraceMs)
    fastify.addHook('onClose', (_instance, done) => {
      uploadRate.close()
      done()
    })
    registerHoldingGauges(fastify.metrics.client, budget, holdings)

    const overloaded = () =>
      appError('SERVICE_OVERLOADED', { 'retry-after': String(config.loadShed.retryAfterSeconds) })
    const { limitConcurrency, reserveBody } = createHoldStages({
      config,
      holdings,
      budget,
      uploadRate,
      metrics,
      overloaded,
    })
    // Callback hooks: no promise per request. Named, as every stage's hook: the order-of-checks
    // test reads the hooks by name.
    const shedder = (isShed: () => boolean): onRequestHookHandler =>
      function shedLoad(request, _reply, done) {
        if (!isShed()) return done()
        metrics.countRefusal('load_shed', request.apiKeyId)
        done(overloaded())
      }
    const shedPartner = shedder(loadShedding.overloaded)
    const shedBestEffort = shedder(loadShedding.strained)
    const requireApiKey: onRequestHookHandler = (request, _reply, done) => {
      done(request.apiKeyId === null ? appError('SECURITY_AUTH_REQUIRED') : undefined)
    }

    /** The stages an operation gets, by phase, in the order of the list above. */
    function stagesFor(op: OperationInfo): OperationStages {
      const onRequest: onRequestHookHandler[] = []
      const preParsing: preParsingHookHandler[] = []
      const preHandler: preHandlerHookHandler[] = []
      const shedLoad = trafficClassOf(op) === 'best-effort' ? shedBestEffort : shedPartner
      if (!op.public) onRequest.push(rateLimit, limitConcurrency, shedLoad, requireApiKey, requireScope(op.scopes))
      if (!op.public && op.bodySchema !== null) onRequest.push(reserveBody)
      const prescanBody = prescanHookFor(op.method, op.url)
      if (prescanBody) preParsing.push(prescanBody)
      if (!op.public && op.systemUuidIn.length > 0) preHandler.push(checkSystems(op.systemUuidIn))
      if (op.idempotent) preHandler.push(requireIdempotencyKey)
      if (op.idempotencyKeyOptional) preHandler.push(checkOptionalIdempotencyKey)
      return { onRequest, preParsing, preHandler }
    }

    const validatorCompiler = createRouteValidatorCompiler()
    fastify.addHook('onRoute', function decideRouteOptions(route: Route) {
      answerAsDeclared(route)
      const operation = operationOf(route)
      if (!operation) return
      const [operationId, op] = operation
      // The Idempotency-Key header is a stage's to check (400, not the schema's 422).
      shapeOperationSchema(route, op.idempotent || op.idempotencyKeyOptional ? [IDEMPOTENCY_KEY_HEADER] : [])
      route.validatorCompiler = validatorCompiler(operationId)
      const stages = stagesFor(op)
      route.onRequest = around(route.onRequest, stages.onRequest)
      route.preParsing = around(route.preParsing, [], stages.preParsing)
      route.preHandler = around(route.preHandler, [], stages.preHandler)
    })
  },
  {
    name: 'request-pipeline',
    dependencies: ['config', 'metrics', 'auth', 'rate-limit', 'load-shedding', 'json-body'],
  },
)

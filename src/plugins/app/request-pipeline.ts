import fp from 'fastify-plugin'
import type { FastifyRequest, onRequestHookHandler, preHandlerHookHandler, RouteOptions } from 'fastify'
import { operations, type OperationId, type OperationInfo } from '../../../generated/operations.js'
import { appError } from '../../errors.js'
import { requireScope } from '../../auth/scope.js'
import { checkSystems } from '../../auth/systems.js'
import { IDEMPOTENCY_KEY_HEADER, requireIdempotencyKey } from '../../idempotency/key.js'
import { createRouteValidatorCompiler } from '../../validation/validator-compiler.js'
import { declaredBodyBytes } from '../../http/body-budget.js'
import { withJsonResponsesByStatus } from '../../http/json-responses.js'
import { answerAndClose } from '../../http/raw-answer.js'
import type { Upload } from '../../http/upload-rate.js'
import type { ServerResponse } from 'node:http'
import { markTimedOutByServer } from '../../http/server-options.js'
import { addressClient } from '../external/rate-limit.js'

/**
 * The order of checks on a request, for every operation of the contract, in one place.
 * The served text (spec/openapi.yaml, "Order of checks") and README.md list the same numbered
 * stages with the same first status; test/platform/order-of-checks.test.ts reads each operation's
 * registered hooks (by name) from the built app and holds their order to that list, so a new stage
 * is a named hook, an item in the spec's list, the same item in the README, and a line here.
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
 */
export interface OperationStages {
  onRequest: onRequestHookHandler[]
  preHandler: preHandlerHookHandler[]
}

export type TrafficClass = 'best-effort' | 'partner' | 'probe'

/** The class of an operation (see above): a rule on its security requirement and scopes. */
export function trafficClassOf(op: Pick<OperationInfo, 'public' | 'scopes'>): TrafficClass {
  if (op.public) return 'probe'
  return op.scopes.length > 0 && op.scopes.every((scope) => scope === 'telemetry:ingest') ? 'best-effort' : 'partner'
}

/**
 * What a request holds until its response closes: a place among its client's requests (and its
 * partner's, for a stored key), and its body's bytes.
 */
interface Held {
  client: string
  /** the partner's root id, when the key is not its own root */
  partner: string | null
  bodyBytes: number
  upload: Upload | undefined
}
const HELD = Symbol('held')
type HoldingResponse = ServerResponse & { [HELD]?: Held }

/** Seconds a client held back for what it holds waits: its requests end within about that. */
const HOLDINGS_RETRY_AFTER = { 'retry-after': '1' }

export default fp(
  async (fastify) => {
    const { config } = fastify
    const rateLimit = fastify.rateLimitHook
    const holdings = fastify.clientHoldings
    const budget = fastify.bodyBudget
    // Callback hooks: no promise per request.
    const overloaded = () =>
      appError('SERVICE_OVERLOADED', { 'retry-after': String(config.loadShed.retryAfterSeconds) })
    const clientOf = (request: FastifyRequest) => request.apiKeyId ?? addressClient(request)
    // What a request holds is given back by one listener, shared by every response (the response
    // is `this`, and carries what its request holds).
    const giveBack = function (this: HoldingResponse) {
      const held = this[HELD]!
      holdings.leave(held.client)
      if (held.partner !== null) holdings.leave(held.partner)
      if (held.bodyBytes === 0) return
      holdings.releaseBody(held.client, held.bodyBytes)
      if (held.partner !== null) holdings.releaseBody(held.partner, held.bodyBytes)
      budget.release(held.bodyBytes)
      fastify.uploadRate.unwatch(held.upload)
    }
    const limitConcurrency: onRequestHookHandler = (request, reply, done) => {
      const key = request.apiKey
      const max = key?.maxConcurrentRequests ?? config.client.maxConcurrentRequests
      const client = clientOf(request)
      if (!holdings.enter(client, max)) {
        fastify.countRefusal('concurrent_requests', request.apiKeyId)
        return done(appError('SECURITY_CONCURRENT_REQUESTS_EXCEEDED', HOLDINGS_RETRY_AFTER))
      }
      const root = key?.partnerRoot ?? null
      if (
        root !== null &&
        !holdings.enter(root.id, root.maxConcurrentRequests ?? config.client.maxConcurrentRequests)
      ) {
        holdings.leave(client)
        fastify.countRefusal('partner_concurrent_requests', request.apiKeyId)
        return done(appError('SECURITY_CONCURRENT_REQUESTS_EXCEEDED', HOLDINGS_RETRY_AFTER))
      }
      const response = reply.raw as HoldingResponse
      response[HELD] = { client, partner: root?.id ?? null, bodyBytes: 0, upload: undefined }
      response.on('close', giveBack)
      done()
    }
    // Named, as every stage's hook: the order-of-checks test reads the hooks by name.
    const shedder = (isShed: () => boolean): onRequestHookHandler =>
      function shedLoad(request, _reply, done) {
        if (!isShed()) return done()
        fastify.countRefusal('load_shed', request.apiKeyId)
        done(overloaded())
      }
    const shedPartner = shedder(() => fastify.overloaded())
    const shedBestEffort = shedder(() => fastify.strained())
    const requireApiKey: onRequestHookHandler = (request, _reply, done) => {
      done(request.apiKeyId === null ? appError('SECURITY_AUTH_REQUIRED') : undefined)
    }
    // After the key check: a caller without a key is refused unread and reserves nothing.
    const reserveBody: onRequestHookHandler = (request, reply, done) => {
      const encoding = request.headers['content-encoding']
      if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity')
        return done(appError('UNSUPPORTED_CONTENT_ENCODING'))
      const bytes = declaredBodyBytes(request.raw, config.bodyLimitBytes)
      if (bytes === 0) return done()
      // The process-wide budget is looked at first, so that a client is not held for bytes it
      // would then not get; both are taken together (nothing awaits in between).
      if (!budget.fits(bytes)) {
        fastify.countRefusal('process_body_bytes_in_flight', request.apiKeyId)
        return done(overloaded())
      }
      const max = request.apiKey?.maxBodyBytesInFlight ?? config.client.maxBodyBytesInFlight
      // Entered at stage 2 (limitConcurrency), whose listener gives the body back too.
      const held = (reply.raw as HoldingResponse)[HELD]!
      if (!holdings.holdBody(held.client, bytes, max)) {
        fastify.countRefusal('body_bytes_in_flight', request.apiKeyId)
        return done(appError('SECURITY_BODY_BYTES_IN_FLIGHT_EXCEEDED', HOLDINGS_RETRY_AFTER))
      }
      if (held.partner !== null) {
        const root = request.apiKey!.partnerRoot!
        if (!holdings.holdBody(held.partner, bytes, root.maxBodyBytesInFlight ?? config.client.maxBodyBytesInFlight)) {
          holdings.releaseBody(held.client, bytes)
          fastify.countRefusal('partner_body_bytes_in_flight', request.apiKeyId)
          return done(appError('SECURITY_BODY_BYTES_IN_FLIGHT_EXCEEDED', HOLDINGS_RETRY_AFTER))
        }
      }
      budget.reserve(bytes)
      held.bodyBytes = bytes
      const keyId = request.apiKeyId
      held.upload = fastify.uploadRate.watch(request.raw, (socket) => {
        markTimedOutByServer(socket)
        fastify.countRefusal('min_upload_rate', keyId)
        request.log.info({ code: 'COMMON_408' }, 'request body too slow')
        if (answerAndClose(socket, 'REQUEST_BODY_TOO_SLOW')) fastify.countEdgeAnswer('REQUEST_BODY_TOO_SLOW')
      })
      done()
    }

    function stagesFor(op: OperationInfo): OperationStages {
      const onRequest: onRequestHookHandler[] = []
      const preHandler: preHandlerHookHandler[] = []
      const shedLoad = trafficClassOf(op) === 'best-effort' ? shedBestEffort : shedPartner
      if (!op.public) onRequest.push(rateLimit, limitConcurrency, shedLoad, requireApiKey, requireScope(op.scopes))
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
      withJsonResponsesByStatus(route)
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

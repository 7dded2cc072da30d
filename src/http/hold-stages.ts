// The pipeline's stages that hold something until the response closes (src/plugins/app/
// request-pipeline.ts lists them): a place among the client's requests in progress (stage 2), and
// the body's bytes against the client's and the process's budgets (stages 6 to 8).
import type { ServerResponse } from 'node:http'
import type { FastifyRequest, onRequestHookHandler } from 'fastify'
import type { Config } from '../config.js'
import { appError } from '../errors.js'
import type { ServiceMetrics } from '../metrics/service-metrics.js'
import { addressClient } from '../rate-limit/address-client.js'
import { type BodyBudget, declaredBodyBytes } from './body-budget.js'
import type { ClientHoldings } from './client-holdings.js'
import { answerAndClose } from './raw-answer.js'
import { markTimedOutByServer } from './server-options.js'
import type { Upload, UploadRateWatch } from './upload-rate.js'

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

interface HoldStagesOptions {
  config: Pick<Config, 'client' | 'bodyLimitBytes'>
  holdings: ClientHoldings
  budget: BodyBudget
  uploadRate: UploadRateWatch
  metrics: Pick<ServiceMetrics, 'countRefusal' | 'countEdgeAnswer'>
  overloaded: () => Error
}

export function createHoldStages({ config, holdings, budget, uploadRate, metrics, overloaded }: HoldStagesOptions): {
  limitConcurrency: onRequestHookHandler
  reserveBody: onRequestHookHandler
} {
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
    uploadRate.unwatch(held.upload)
  }
  // Callback hooks: no promise per request. Named, as every stage's hook: the order-of-checks
  // test reads the hooks by name.
  const limitConcurrency: onRequestHookHandler = (request, reply, done) => {
    const key = request.apiKey
    const max = key?.maxConcurrentRequests ?? config.client.maxConcurrentRequests
    const client = clientOf(request)
    if (!holdings.enter(client, max)) {
      metrics.countRefusal('concurrent_requests', request.apiKeyId)
      return done(appError('SECURITY_CONCURRENT_REQUESTS_EXCEEDED', HOLDINGS_RETRY_AFTER))
    }
    const root = key?.partnerRoot ?? null
    if (root !== null && !holdings.enter(root.id, root.maxConcurrentRequests ?? config.client.maxConcurrentRequests)) {
      holdings.leave(client)
      metrics.countRefusal('partner_concurrent_requests', request.apiKeyId)
      return done(appError('SECURITY_CONCURRENT_REQUESTS_EXCEEDED', HOLDINGS_RETRY_AFTER))
    }
    const response = reply.raw as HoldingResponse
    response[HELD] = { client, partner: root?.id ?? null, bodyBytes: 0, upload: undefined }
    response.on('close', giveBack)
    done()
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
      metrics.countRefusal('process_body_bytes_in_flight', request.apiKeyId)
      return done(overloaded())
    }
    const max = request.apiKey?.maxBodyBytesInFlight ?? config.client.maxBodyBytesInFlight
    // Entered at stage 2 (limitConcurrency), whose listener gives the body back too.
    const held = (reply.raw as HoldingResponse)[HELD]!
    if (!holdings.holdBody(held.client, bytes, max)) {
      metrics.countRefusal('body_bytes_in_flight', request.apiKeyId)
      return done(appError('SECURITY_BODY_BYTES_IN_FLIGHT_EXCEEDED', HOLDINGS_RETRY_AFTER))
    }
    if (held.partner !== null) {
      const root = request.apiKey!.partnerRoot!
      if (!holdings.holdBody(held.partner, bytes, root.maxBodyBytesInFlight ?? config.client.maxBodyBytesInFlight)) {
        holdings.releaseBody(held.client, bytes)
        metrics.countRefusal('partner_body_bytes_in_flight', request.apiKeyId)
        return done(appError('SECURITY_BODY_BYTES_IN_FLIGHT_EXCEEDED', HOLDINGS_RETRY_AFTER))
      }
    }
    budget.reserve(bytes)
    held.bodyBytes = bytes
    const keyId = request.apiKeyId
    held.upload = uploadRate.watch(request.raw, (socket) => {
      markTimedOutByServer(socket)
      metrics.countRefusal('min_upload_rate', keyId)
      request.log.info({ code: 'COMMON_408' }, 'request body too slow')
      if (answerAndClose(socket, 'REQUEST_BODY_TOO_SLOW')) metrics.countEdgeAnswer('REQUEST_BODY_TOO_SLOW')
    })
    done()
  }
  return { limitConcurrency, reserveBody }
}

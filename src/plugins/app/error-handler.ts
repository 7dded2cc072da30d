import fp from 'fastify-plugin'
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { type AnsweredError, AppError, appError, type ErrorKey } from '../../errors.js'
import { answerUnrouted, sendError } from '../../http/error-answer.js'
import { timedOutByServer } from '../../http/server-options.js'
import { isDatabaseUnavailable } from '../../db/unavailable.js'
import { RequestValidationError } from '../../validation/request-validation-error.js'
import {
  malformedBodyItem,
  toValidationItems,
  validationBody,
  type RequestPart,
} from '../../validation/validation-errors.js'

const RETRY_AFTER_SECONDS = '5'
const MALFORMED_BODY = new Set([
  'FST_ERR_CTP_EMPTY_JSON_BODY',
  'FST_ERR_CTP_INVALID_JSON_BODY',
  'FST_ERR_CTP_INVALID_CONTENT_LENGTH',
])

/** What may be logged of an unexpected error: no stack, no SQL, no parameters. */
export function safeErrorFields(err: unknown): Record<string, unknown> {
  const e = err as { name?: unknown; code?: unknown; message?: unknown }
  return {
    type: typeof e?.name === 'string' ? e.name : typeof err,
    code: typeof e?.code === 'string' ? e.code : undefined,
    message: typeof e?.message === 'string' ? e.message.slice(0, 200) : undefined,
  }
}

declare module 'fastify' {
  interface FastifyReply {
    /** The catalogued error this reply answers (null on success): read by the request log and metrics. */
    answeredError: AnsweredError | null
  }
}

function validationGroup(request: FastifyRequest): string | null {
  return (
    ((request.routeOptions.schema as Record<string, unknown> | undefined)?.['x-validation-group'] as string) ?? null
  )
}

function sendValidation(request: FastifyRequest, reply: FastifyReply, items: ReturnType<typeof toValidationItems>) {
  // A 422 names one item per field; its first item stands for the answer in logs and metrics.
  const first = items[0]
  if (first) reply.answeredError = { code: first.code, key: first.key }
  return reply.code(422).send(validationBody(request.method, request.url.split('?')[0]!, items))
}

/** The catalogue entry for a framework or plugin error that carries a 4xx status. */
const CLIENT_ERROR_BY_STATUS: Record<number, ErrorKey> = {
  400: 'MALFORMED_REQUEST',
  401: 'SECURITY_AUTH_REQUIRED',
  404: 'ROUTE_NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  408: 'REQUEST_TIMEOUT',
  413: 'SECURITY_REQUEST_BODY_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'SECURITY_RATE_LIMIT_EXCEEDED',
  431: 'REQUEST_HEADERS_TOO_LARGE',
}

/** A client that went away mid-request (aborted upload, reset): not a server fault. */
function clientWentAway(request: FastifyRequest): boolean {
  return request.raw.aborted || request.raw.socket?.destroyed === true
}

/**
 * Maps every failure to its catalogued envelope; the only place that shapes error bodies.
 * Bad input keeps a 4xx and is logged below ERROR; ERROR is for 5xx only.
 */
export default fp(
  async (fastify) => {
    fastify.decorateReply('answeredError', null)
    fastify.setErrorHandler((error: FastifyError, request, reply) => {
      if (error instanceof AppError) return sendError(reply, error)
      if (error instanceof RequestValidationError) return sendValidation(request, reply, error.items)
      if (error.validation) {
        return sendValidation(
          request,
          reply,
          toValidationItems(error.validationContext as RequestPart, error.validation, validationGroup(request)),
        )
      }

      switch (error.code) {
        case 'FST_ERR_CTP_BODY_TOO_LARGE':
          return sendError(reply, appError('SECURITY_REQUEST_BODY_TOO_LARGE'))
        case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
          return sendError(reply, appError('UNSUPPORTED_MEDIA_TYPE'))
      }
      if (clientWentAway(request)) {
        const timedOut = timedOutByServer(request.raw.socket)
        // The server's own 408 is counted where it was written, at the HTTP edge.
        if (!timedOut) fastify.serviceMetrics.countAbortedRequest(request)
        const why = timedOut ? 'request timed out' : 'client aborted'
        request.log.info({ code: typeof error.code === 'string' ? error.code : undefined }, why)
        return sendError(reply, appError('MALFORMED_REQUEST'))
      }
      if (MALFORMED_BODY.has(error.code) || (error instanceof SyntaxError && error.statusCode === 400)) {
        return sendValidation(request, reply, [malformedBodyItem(validationGroup(request))])
      }
      const status = error.statusCode
      if (typeof status === 'number' && status >= 400 && status < 500) {
        request.log.info({ err: error }, 'request refused')
        return sendError(reply, appError(CLIENT_ERROR_BY_STATUS[status] ?? 'MALFORMED_REQUEST'))
      }

      if (isDatabaseUnavailable(error)) {
        request.log.warn({ err: error }, 'database unavailable')
        return sendError(reply, appError('SERVICE_UNAVAILABLE', { 'retry-after': RETRY_AFTER_SECONDS }))
      }
      request.log.error({ err: error }, 'unexpected error')
      return sendError(reply, appError('INTERNAL_ERROR'))
    })

    // Answered at onRequest, so an unrouted request's body is never read (src/http/error-answer.ts).
    fastify.addHook('onRequest', (request, reply, done) => {
      if (request.is404) return answerUnrouted(request, reply)
      done()
    })
    fastify.setNotFoundHandler(answerUnrouted)
  },
  { name: 'error-handler', dependencies: ['metrics'] },
)

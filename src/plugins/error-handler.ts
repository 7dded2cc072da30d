import fp from 'fastify-plugin'
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { AppError, appError } from '../errors.js'
import { isDatabaseUnavailable } from '../db/unavailable.js'
import { RequestValidationError } from '../validation/request-validation-error.js'
import { malformedBodyItem, toValidationItems, validationBody, type RequestPart } from '../validation/validation-errors.js'

const RETRY_AFTER_SECONDS = '5'
const MALFORMED_BODY = new Set(['FST_ERR_CTP_EMPTY_JSON_BODY', 'FST_ERR_CTP_INVALID_JSON_BODY', 'FST_ERR_CTP_INVALID_CONTENT_LENGTH'])

/** What may be logged of an unexpected error: no stack, no SQL, no parameters. */
export function safeErrorFields(err: unknown): Record<string, unknown> {
  const e = err as { name?: unknown; code?: unknown; message?: unknown }
  return {
    type: typeof e?.name === 'string' ? e.name : typeof err,
    code: typeof e?.code === 'string' ? e.code : undefined,
    message: typeof e?.message === 'string' ? e.message.slice(0, 200) : undefined,
  }
}

function validationGroup(request: FastifyRequest): string | null {
  return ((request.routeOptions.schema as Record<string, unknown> | undefined)?.['x-validation-group'] as string) ?? null
}

function sendValidation(request: FastifyRequest, reply: FastifyReply, items: ReturnType<typeof toValidationItems>) {
  return reply.code(422).send(validationBody(request.method, request.url.split('?')[0]!, items))
}

function sendError(reply: FastifyReply, err: AppError) {
  if (Object.keys(err.headers).length > 0) reply.headers(err.headers)
  return reply.code(err.statusCode).send(err.envelope())
}

/** Maps every failure to its catalogued envelope; the only place that shapes error bodies. */
export default fp(
  async (fastify) => {
    fastify.setErrorHandler((error: FastifyError, request, reply) => {
      if (error instanceof AppError) return sendError(reply, error)
      if (error instanceof RequestValidationError) return sendValidation(request, reply, error.items)

      if (error.validation) {
        const part = error.validationContext as RequestPart
        if (part === 'headers' && error.validation.some((e) => /idempotency-key/i.test(`${e.instancePath} ${JSON.stringify(e.params)}`))) {
          const missing = request.headers['idempotency-key'] === undefined
          return sendError(reply, appError(missing ? 'IDEMPOTENCY_KEY_REQUIRED' : 'IDEMPOTENCY_KEY_INVALID'))
        }
        return sendValidation(request, reply, toValidationItems(part, error.validation as never, validationGroup(request)))
      }

      switch (error.code) {
        case 'FST_ERR_CTP_BODY_TOO_LARGE':
          return sendError(reply, appError('SECURITY_REQUEST_BODY_TOO_LARGE'))
        case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
          return sendError(reply, appError('UNSUPPORTED_MEDIA_TYPE'))
      }
      if (MALFORMED_BODY.has(error.code) || (error instanceof SyntaxError && error.statusCode === 400)) {
        return sendValidation(request, reply, [malformedBodyItem(validationGroup(request))])
      }

      if (isDatabaseUnavailable(error)) {
        request.log.warn({ err: error }, 'database unavailable')
        return sendError(reply, appError('SERVICE_UNAVAILABLE', { 'retry-after': RETRY_AFTER_SECONDS }))
      }
      request.log.error({ err: error }, 'unexpected error')
      return sendError(reply, appError('INTERNAL_ERROR'))
    })

    fastify.setNotFoundHandler((_request, reply) => sendError(reply, appError('ROUTE_NOT_FOUND')))
  },
  { name: 'error-handler' },
)

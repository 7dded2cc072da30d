import type { preHandlerHookHandler } from 'fastify'
import { appError, type AppError } from '../errors.js'

/** The Idempotency-Key format of the contract: 1..128 printable ASCII characters. */
export const IDEMPOTENCY_KEY_PATTERN = /^[ -~]{1,128}$/
export const IDEMPOTENCY_KEY_HEADER = 'idempotency-key'

export const isValidIdempotencyKey = (value: unknown): value is string =>
  typeof value === 'string' && IDEMPOTENCY_KEY_PATTERN.test(value)

/**
 * Pipeline stage for idempotent writes: a missing or malformed Idempotency-Key is a 400, after
 * schema validation (422) and the systems check (403). The spec declares the header required so
 * that generated SDKs force it; the pipeline takes it out of Fastify's header validation, which
 * would answer 422 before those checks.
 */
export const requireIdempotencyKey: preHandlerHookHandler = (request, _reply, done) => {
  done(idempotencyKeyError(request.headers[IDEMPOTENCY_KEY_HEADER]))
}

/** The 400 for a missing or malformed Idempotency-Key header value, or undefined when it is valid. */
export function idempotencyKeyError(value: unknown): AppError | undefined {
  if (isValidIdempotencyKey(value)) return undefined
  return appError(value === undefined ? 'IDEMPOTENCY_KEY_REQUIRED' : 'IDEMPOTENCY_KEY_INVALID')
}

/** Pipeline stage for a write whose Idempotency-Key is optional: only a malformed one is a 400. */
export const checkOptionalIdempotencyKey: preHandlerHookHandler = (request, _reply, done) => {
  const value = request.headers[IDEMPOTENCY_KEY_HEADER]
  done(value === undefined ? undefined : idempotencyKeyError(value))
}

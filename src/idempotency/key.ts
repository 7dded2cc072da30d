import type { preHandlerHookHandler } from 'fastify'
import { appError } from '../errors.js'

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
  const key = request.headers[IDEMPOTENCY_KEY_HEADER]
  if (key === undefined) return done(appError('IDEMPOTENCY_KEY_REQUIRED'))
  done(isValidIdempotencyKey(key) ? undefined : appError('IDEMPOTENCY_KEY_INVALID'))
}

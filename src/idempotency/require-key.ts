// Idempotency-Key presence and format, checked at preHandler: after validation (422) and the
// systems check (403), before any lookup. The header stays required in the spec (SDKs send
// it); the runtime header schema leaves it out so that Fastify's validation does not answer
// for it first (see withoutIdempotencyKeyHeader).
import type { preHandlerHookHandler } from 'fastify'
import { appError } from '../errors.js'
import { isValidIdempotencyKey } from './key.js'

export const requireIdempotencyKey: preHandlerHookHandler = (request, _reply, done) => {
  const key = request.headers['idempotency-key']
  if (key === undefined) return done(appError('IDEMPOTENCY_KEY_REQUIRED'))
  done(isValidIdempotencyKey(key) ? undefined : appError('IDEMPOTENCY_KEY_INVALID'))
}

/** A copy of a route's header schema without Idempotency-Key (checked by requireIdempotencyKey). */
export function withoutIdempotencyKeyHeader(headers: unknown): unknown {
  const schema = headers as { properties?: Record<string, unknown>; required?: string[] } | undefined
  if (!schema?.properties) return headers
  const properties = Object.fromEntries(Object.entries(schema.properties).filter(([name]) => name.toLowerCase() !== 'idempotency-key'))
  const required = schema.required?.filter((name) => name.toLowerCase() !== 'idempotency-key')
  return { ...schema, properties, ...(required ? { required } : {}) }
}

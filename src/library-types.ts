// The few places where a library's published types are narrower than the behaviour it
// documents: each cast is made here, once, typed on both sides, so the rest of the code calls
// these instead of casting.
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit'
import type { FastifySwaggerUiOptions } from '@fastify/swagger-ui'
import type { FastifyBaseLogger } from 'fastify'
import type pino from 'pino'
import type postgres from 'postgres'
import type { Db } from './db/client.js'

/**
 * A jsonb parameter. postgres.js types `json()` as taking a JSONValue, which no interface or
 * `Record<string, unknown>` is assignable to, though any JSON-serializable value works.
 */
export function jsonb(db: Db, value: object | unknown[]): postgres.Parameter {
  return db.json(value as postgres.JSONValue)
}

/** A json parameter (oid 114): sent as JSON text, which PostgreSQL keeps as text until read. */
export function json(db: Db, value: object | unknown[]): postgres.Parameter<postgres.JSONValue> {
  return db.typed(value as postgres.JSONValue, 114)
}

/**
 * @fastify/rate-limit takes a store class and constructs it with `new`; a function that returns
 * an object gives that object under `new`, so the store built (and closed) by the caller is used.
 */
export function existingStore(store: FastifyRateLimitStore): FastifyRateLimitStoreCtor {
  return function useStore() {
    return store
  } as unknown as FastifyRateLimitStoreCtor
}

/** Swagger UI takes any of its config keys (dotted ones such as `urls.primaryName`); the plugin's type lists a subset. */
export function swaggerUiConfig(config: Record<string, unknown>): FastifySwaggerUiOptions['uiConfig'] {
  return config as FastifySwaggerUiOptions['uiConfig']
}

/**
 * Adds fields to a request's logger in place. Fastify's logger type lists only the log methods,
 * but the service's request loggers are pino children, whose `setBindings` does this; a logger
 * without it (Fastify's null logger when logging is off) has no lines to add them to.
 */
export function addLogBindings(log: FastifyBaseLogger, bindings: Record<string, string>): void {
  ;(log as Partial<Pick<pino.Logger, 'setBindings'>>).setBindings?.(bindings)
}

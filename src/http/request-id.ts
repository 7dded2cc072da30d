// The request id: the client's X-Request-Id when it is acceptable, else one the server makes.
import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { FastifyRequest } from 'fastify'

// Only 1..128 printable ASCII is echoed: anything else (CR/LF included) is replaced.
const ACCEPTABLE = /^[ -~]{1,128}$/

/** Fastify `genReqId`: the incoming X-Request-Id when acceptable, else a new UUID. */
export function requestIdFrom(raw: IncomingMessage): string {
  const incoming = raw.headers['x-request-id']
  return typeof incoming === 'string' && ACCEPTABLE.test(incoming) ? incoming : randomUUID()
}

/** The X-Request-Id the client sent, when the request carries it as its id; null when the server made the id. */
export function clientRequestIdOf(request: FastifyRequest): string | null {
  return request.headers['x-request-id'] === request.id ? request.id : null
}

const serverIds = new WeakMap<FastifyRequest, string>()
/**
 * An id of the request that the server made and no client chose: its id when the server made
 * it, else a UUID made on first use (a record that must not take a client's word, the admin
 * audit, keeps this one and the client's beside it).
 */
export function serverRequestIdOf(request: FastifyRequest): string {
  if (clientRequestIdOf(request) === null) return request.id
  let id = serverIds.get(request)
  if (id === undefined) {
    id = randomUUID()
    serverIds.set(request, id)
  }
  return id
}

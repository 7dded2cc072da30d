import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import fp from 'fastify-plugin'

// Only 1..128 printable ASCII is echoed: anything else (CR/LF included) is replaced.
const ACCEPTABLE = /^[ -~]{1,128}$/

/** Fastify `genReqId`: the incoming X-Request-Id when acceptable, else a new UUID. */
export function requestIdFrom(raw: IncomingMessage): string {
  const incoming = raw.headers['x-request-id']
  return typeof incoming === 'string' && ACCEPTABLE.test(incoming) ? incoming : randomUUID()
}

/** Echoes the request id on every response, errors and 404s included. */
export default fp(
  async (fastify) => {
    // A callback hook: no promise per request.
    fastify.addHook('onRequest', (request, reply, done) => {
      reply.header('x-request-id', request.id)
      done()
    })
  },
  { name: 'request-id' },
)

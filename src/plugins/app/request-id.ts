import fp from 'fastify-plugin'

/**
 * Echoes the request id (src/http/request-id.ts, Fastify's genReqId) on every response, errors
 * and 404s included.
 */
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

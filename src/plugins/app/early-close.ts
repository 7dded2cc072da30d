import fp from 'fastify-plugin'

/**
 * An answer given before the request's body was read (401, 404, 413, 415, 429...) closes the
 * connection instead of waiting for the rest of the body, so a client cannot hold a socket
 * and its buffers by trickling a body nobody will read.
 */
export default fp(
  async (fastify) => {
    // A callback hook: no promise per request.
    fastify.addHook('onSend', (request, reply, payload, done) => {
      if (request.raw.complete === false) reply.header('connection', 'close')
      done(null, payload)
    })
  },
  { name: 'early-close' },
)

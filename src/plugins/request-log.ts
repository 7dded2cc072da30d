import fp from 'fastify-plugin'

/** One log line per answered request: no headers, no body, no query string. */
export default fp(
  async (fastify) => {
    fastify.addHook('onResponse', async (request, reply) => {
      request.log.info(
        { method: request.method, route: request.routeOptions.url ?? 'unmatched', status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 },
        'request completed',
      )
    })
  },
  { name: 'request-log' },
)

import fp from 'fastify-plugin'

/** One log line per answered request: no headers, no body, no query string. */
export default fp(
  async (fastify) => {
    // Below info nothing would be written: skip the per-request hook entirely.
    const log = fastify.log as { isLevelEnabled?: (level: string) => boolean }
    if (!log.isLevelEnabled?.('info')) return
    fastify.addHook('onResponse', async (request, reply) => {
      request.log.info(
        { method: request.method, route: request.routeOptions.url ?? 'unmatched', status: reply.statusCode, key_id: request.apiKeyId, ms: Math.round(reply.elapsedTime * 10) / 10 },
        'request completed',
      )
    })
  },
  { name: 'request-log' },
)

import fp from 'fastify-plugin'
import { routeTemplate } from '../../route-template.js'

/**
 * One log line per answered request: no headers, no body, no query string. An error answer
 * carries its catalogued `code` and `error_key`; every line names the API key's `key_id` (null
 * without a known key).
 */
export default fp(
  async (fastify) => {
    // Below info nothing would be written: skip the per-request hook entirely.
    const log = fastify.log as { isLevelEnabled?: (level: string) => boolean }
    if (!log.isLevelEnabled?.('info')) return
    // A callback hook: no promise per request.
    fastify.addHook('onResponse', (request, reply, done) => {
      const error = reply.answeredError
      request.log.info(
        {
          method: request.method,
          route: routeTemplate(request),
          status: reply.statusCode,
          ms: Math.round(reply.elapsedTime * 10) / 10,
          code: error?.code,
          error_key: error?.key,
          key_id: request.apiKeyId,
        },
        'request completed',
      )
      done()
    })
  },
  { name: 'request-log' },
)

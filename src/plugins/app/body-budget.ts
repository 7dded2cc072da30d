import fp from 'fastify-plugin'
import { type BodyBudget, createBodyBudget } from '../../http/body-budget.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Request-body bytes in flight across the process (BODY_BYTES_IN_FLIGHT_MAX). */
    bodyBudget: BodyBudget
  }
}

/**
 * Exposes `fastify.bodyBudget` and its gauge. It refuses nothing itself: the request pipeline
 * reserves each body before it is read, on the operations that take one.
 */
export default fp(
  async (fastify) => {
    const budget = createBodyBudget(fastify.config.bodyBytesInFlightMax, fastify.config.bodyLimitBytes)
    fastify.decorate('bodyBudget', budget)
    new fastify.metrics.client.Gauge({
      name: 'http_request_body_bytes_in_flight',
      help: 'Request-body bytes reserved by requests being received or answered (capped by BODY_BYTES_IN_FLIGHT_MAX)',
      collect() {
        this.set(budget.inFlight)
      },
    })
  },
  { name: 'body-budget', dependencies: ['config', 'metrics'] },
)

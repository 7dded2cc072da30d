import fp from 'fastify-plugin'
import openapiGlue from 'fastify-openapi-glue'
import { createServiceHandlers } from '../../handlers/index.js'
import { createIdempotency } from '../idempotency/index.js'
import { specPath } from '../paths.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Set when shutdown begins; /ready answers not_ready from then on. */
    draining: boolean
  }
}

/** Binds every operationId of spec/openapi.yaml to its handler in handlers/. */
export default fp<{ now?: () => Date }>(
  async (fastify, { now = () => new Date() }) => {
    fastify.decorate('draining', false)
    const serviceHandlers = createServiceHandlers({
      config: fastify.config,
      db: fastify.db,
      answerIdempotently: createIdempotency(fastify.db, fastify.config.idempotencyTtlHours),
      isDraining: () => fastify.draining,
      isUnderPressure: () => fastify.overloaded(),
      now,
    })
    await fastify.register(openapiGlue, { specification: specPath, serviceHandlers })
  },
  { name: 'routes', dependencies: ['config', 'database', 'request-pipeline', 'load-shedding', 'error-handler'] },
)

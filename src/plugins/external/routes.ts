import fp from 'fastify-plugin'
import openapiGlue from 'fastify-openapi-glue'
import { readSpec } from '../../spec.js'

/**
 * Binds every operationId of spec/openapi.yaml to its handler. The handlers (handlers/) are built
 * by the composition root (src/app.ts) and handed in: no plugin imports them.
 */
export default fp<{ serviceHandlers: object }>(
  async (fastify, { serviceHandlers }) => {
    await fastify.register(openapiGlue, { specification: readSpec(), serviceHandlers })
  },
  { name: 'routes', dependencies: ['request-pipeline'] },
)

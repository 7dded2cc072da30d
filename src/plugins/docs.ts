import fp from 'fastify-plugin'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import { specPath } from '../paths.js'

/** The contract, unchanged, at /openapi.json and the offline Swagger UI at /docs. */
export default fp(
  async (fastify) => {
    await fastify.register(swagger, { mode: 'static', specification: { path: specPath, baseDir: '' } } as never)
    await fastify.register(swaggerUi, { routePrefix: '/docs', uiConfig: { url: '/openapi.json' } as never, staticCSP: true })
    fastify.get('/openapi.json', { schema: { hide: true } }, async () => fastify.swagger())
  },
  { name: 'docs' },
)

import fp from 'fastify-plugin'
import type { FastifyReply, FastifyRequest } from 'fastify'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import { readSpec } from '../../spec.js'
import { buildServedDocument } from '../../docs/served-document.js'
import { readServedWorkflows } from '../../docs/served-workflows.js'
import { swaggerUiConfig } from '../../library-types.js'
import { escapesStaticFolder } from '../../docs/static-path.js'

/**
 * The contract at /openapi.json (spec/openapi.yaml plus each operation's error codes, see
 * src/docs/served-document.ts) and the offline Swagger UI at /docs, which reads that same
 * document (and /docs/json serves it too); beside it, the partner journeys at /arazzo.yaml
 * (spec/workflows.arazzo.yaml, see src/docs/served-workflows.ts).
 */
export default fp(
  async (fastify) => {
    const document = buildServedDocument(readSpec())
    const workflows = readServedWorkflows()
    await fastify.register(swagger, { mode: 'static', specification: { document } })
    await fastify.register(async (scope) => {
      scope.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
        if (request.url.startsWith('/docs/static/') && escapesStaticFolder(request.url)) return reply.callNotFound()
      })
      await scope.register(swaggerUi, {
        routePrefix: '/docs',
        // Swagger UI's Topbar reads `urls` in preference to the `/docs/json` it is otherwise given.
        uiConfig: swaggerUiConfig({
          urls: [{ url: '/openapi.json', name: 'Study Service' }],
          'urls.primaryName': 'Study Service',
        }),
        staticCSP: true,
        // Without upgrade-insecure-requests: over plain HTTP on any host name other than
        // localhost, browsers would fetch every asset over https and the page would stay blank.
        transformStaticCSP: (header: string) => header.replace(/\s*upgrade-insecure-requests;?/g, ''),
      })
    })
    fastify.get('/openapi.json', { schema: { hide: true } }, async () => fastify.swagger())
    fastify.get('/arazzo.yaml', { schema: { hide: true } }, async (_request, reply) =>
      reply.type('application/yaml; charset=utf-8').send(workflows),
    )
  },
  { name: 'docs' },
)

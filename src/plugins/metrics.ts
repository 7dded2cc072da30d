import fp from 'fastify-plugin'
import fastifyMetrics from 'fastify-metrics'
import type { FastifyRequest } from 'fastify'
import type { ObserveDbOperation } from '../repositories/index.js'

declare module 'fastify' {
  interface FastifyInstance {
    observeDbOperation: ObserveDbOperation
  }
}

/** The route template in OpenAPI form (`/api/v1/user/{system_uuid}/...`), never the concrete path. */
export function pathTemplate(request: FastifyRequest): string {
  const url = request.routeOptions.url
  return url ? url.replace(/:(\w+)/g, '{$1}') : 'unmatched'
}

/**
 * GET /metrics (Prometheus text): http_request_duration_seconds and http_requests_total by
 * method, path_template and status; db_operation_duration_seconds by operation.
 */
export default fp(
  async (fastify) => {
    await fastify.register(fastifyMetrics.default ?? fastifyMetrics, {
      endpoint: '/metrics',
      clearRegisterOnInit: true,
      defaultMetrics: { enabled: true },
      routeMetrics: {
        enabled: { histogram: true, summary: false },
        registeredRoutesOnly: false,
        invalidRouteGroup: 'unmatched',
        routeBlacklist: ['/metrics'],
        overrides: {
          labels: { route: 'path_template', status: 'status', getRouteLabel: pathTemplate },
          histogram: { name: 'http_request_duration_seconds' },
        },
      },
    } as never)
    const client = fastify.metrics.client
    const requests = new client.Counter({
      name: 'http_requests_total',
      help: 'HTTP requests answered, by method, route template and status',
      labelNames: ['method', 'path_template', 'status'],
    })
    const dbDuration = new client.Histogram({
      name: 'db_operation_duration_seconds',
      help: 'Duration of repository operations against PostgreSQL',
      labelNames: ['operation'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    })
    fastify.addHook('onResponse', async (request, reply) => {
      if (request.routeOptions.url === '/metrics') return
      requests.inc({ method: request.method, path_template: pathTemplate(request), status: String(reply.statusCode) })
    })
    fastify.decorate('observeDbOperation', ((operation, seconds) => dbDuration.observe({ operation }, seconds)) as ObserveDbOperation)
  },
  { name: 'metrics' },
)

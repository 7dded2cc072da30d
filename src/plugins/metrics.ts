import fp from 'fastify-plugin'
import fastifyMetrics from 'fastify-metrics'
import type { FastifyReply, FastifyRequest } from 'fastify'
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

/** prom-client's labels() hashes the labels on every call: each series is made once per key and kept. */
function keptSeries<Args extends unknown[], Series>(make: (...args: Args) => Series) {
  const kept = new Map<string, Series>()
  return (key: string, ...args: Args): Series => {
    let series = kept.get(key)
    if (series === undefined) {
      series = make(...args)
      kept.set(key, series)
    }
    return series
  }
}

/**
 * GET /metrics (Prometheus text): fastify-metrics serves the endpoint and the process metrics;
 * http_request_duration_seconds and http_requests_total by method, path_template and status, and
 * db_operation_duration_seconds by operation, are ours. The labelled series of each
 * (method, route, status) are looked up once and kept, so a request costs one Map lookup
 * instead of label hashing in prom-client, and no extra onRequest hook (Fastify times the reply).
 */
export default fp(
  async (fastify) => {
    await fastify.register(fastifyMetrics.default ?? fastifyMetrics, {
      endpoint: '/metrics',
      clearRegisterOnInit: true,
      defaultMetrics: { enabled: true },
      routeMetrics: { enabled: false },
    } as never)
    const client = fastify.metrics.client
    const labelNames = ['method', 'path_template', 'status'] as const
    const duration = new client.Histogram({
      name: 'http_request_duration_seconds',
      help: 'Time to answer HTTP requests, by method, route template and status',
      labelNames,
    })
    const requests = new client.Counter({
      name: 'http_requests_total',
      help: 'HTTP requests answered, by method, route template and status',
      labelNames,
    })
    const dbDuration = new client.Histogram({
      name: 'db_operation_duration_seconds',
      help: 'Duration of repository operations against PostgreSQL',
      labelNames: ['operation'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    })

    // Bounded: methods, registered routes (or "unmatched") and statuses are all finite sets.
    const routeSeries = keptSeries((request: FastifyRequest, reply: FastifyReply) => {
      const labels = { method: request.method, path_template: pathTemplate(request), status: String(reply.statusCode) }
      return { duration: duration.labels(labels), requests: requests.labels(labels) }
    })
    fastify.addHook('onResponse', (request, reply, done) => {
      if (request.routeOptions.url !== '/metrics') {
        const route = routeSeries(`${request.method} ${request.routeOptions.url} ${reply.statusCode}`, request, reply)
        route.duration.observe(reply.elapsedTime / 1000)
        route.requests.inc()
      }
      done()
    })

    const operationSeries = keptSeries((operation: string) => dbDuration.labels({ operation }))
    fastify.decorate('observeDbOperation', ((operation, seconds) => operationSeries(operation, operation).observe(seconds)) as ObserveDbOperation)
  },
  { name: 'metrics' },
)

// The service's own counters beside fastify-metrics' request histogram: http_requests_total
// (the histogram's counts, read at scrape time), the error, aborted, replay, conflict, 429 and
// load-shed counters, the client refusals and db_operation_duration_seconds by statement.
import type { FastifyReply, FastifyRequest, onResponseHookHandler } from 'fastify'
import { type AnsweredError, catalogueEntry, type ErrorKey } from '../errors.js'
import type { ObserveDbOperation } from '../repositories/index.js'
import { routeTemplate } from '../route-template.js'
import { keptSeries, type MetricsClient } from './client.js'

/** fastify-metrics' route histogram (src/plugins/external/metrics.ts names it). */
export const ROUTE_HISTOGRAM = 'http_request_duration_seconds'

/** Why a request of a client was held back (a label of http_client_refusals_total). */
export type RefusalReason =
  | 'concurrent_requests'
  | 'partner_concurrent_requests'
  | 'body_bytes_in_flight'
  | 'partner_body_bytes_in_flight'
  | 'process_body_bytes_in_flight'
  | 'min_upload_rate'
  | 'load_shed'

/** What the rest of the service counts, as `fastify.serviceMetrics`. */
export interface ServiceMetrics {
  /** The onResponse hook that counts each answer. */
  countAnswer: onResponseHookHandler
  /** Counts an error answer written at the HTTP edge, where no route or onResponse runs. */
  countEdgeAnswer(key: ErrorKey): void
  /** Counts a routed request whose client left before its answer (its body cut short). */
  countAbortedRequest(request: FastifyRequest): void
  /** Counts a refusal by reason and key id (null: a client without a valid key). */
  countRefusal(reason: RefusalReason, keyId: string | null): void
  observeDbOperation: ObserveDbOperation
}

const IDEMPOTENCY_CONFLICTS = new Set([
  'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD',
  'IDEMPOTENCY_REQUEST_IN_PROGRESS',
])
/** The request pipeline's answer when the process sheds load (503 with Retry-After). */
const LOAD_SHED = 'SERVICE_OVERLOADED'
/** The key_id label of a client without a valid key: addresses are not labels (unbounded). */
const NO_KEY = 'none'

export function createServiceMetrics(client: MetricsClient): ServiceMetrics {
  // The contract's acceptance criteria, the alerts and the dashboard name this counter; it is
  // the histogram's _count under its own name, copied at scrape time (nothing per request).
  new client.Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered, by method, route template and status',
    labelNames: ['method', 'path_template', 'status'],
    async collect() {
      const histogram = client.register.getSingleMetric(ROUTE_HISTOGRAM)
      this.reset()
      if (!histogram) return
      const { values } = await histogram.get()
      for (const { metricName, labels, value } of values as { metricName?: string; labels: object; value: number }[])
        if (metricName === `${ROUTE_HISTOGRAM}_count`) this.inc(labels as Record<string, string>, value)
    },
  })
  const errors = new client.Counter({
    name: 'http_errors_total',
    help: 'Error answers by status and catalogued code and key (a 422 by its first item)',
    labelNames: ['status', 'code', 'key'],
  })
  const aborted = new client.Counter({
    name: 'http_requests_aborted_total',
    help: 'Requests whose client left before the answer (an upload cut short), by method and route template',
    labelNames: ['method', 'path_template'],
  })
  const replays = new client.Counter({
    name: 'idempotency_replays_total',
    help: 'Writes answered with a stored answer (Idempotent-Replayed: true), by route template',
    labelNames: ['path_template'],
  })
  const conflicts = new client.Counter({
    name: 'idempotency_conflicts_total',
    help: '409s for an Idempotency-Key reused with another body or still in progress, by key',
    labelNames: ['key'],
  })
  const rateLimited = new client.Counter({
    name: 'http_rate_limited_total',
    help: 'Requests refused with 429 by the rate limiter, by route template',
    labelNames: ['path_template'],
  })
  const loadShed = new client.Counter({
    name: 'http_load_shed_total',
    help: 'Requests refused with 503 SERVICE_OVERLOADED because the process was overloaded, by route template',
    labelNames: ['path_template'],
  })
  const refusals = new client.Counter({
    name: 'http_client_refusals_total',
    help: 'Requests a client was refused for what it holds or how it sends, and load shed, by reason and API key id ("none" without a valid key)',
    labelNames: ['reason', 'key_id'],
  })
  const dbDuration = new client.Histogram({
    name: 'db_operation_duration_seconds',
    help: 'Duration of statements sent to PostgreSQL, from made to answered, by operation and table (SELECT users)',
    labelNames: ['operation'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  })

  const errorSeries = keptSeries((status: number, error: AnsweredError) =>
    errors.labels({ status: String(status), code: error.code, key: error.key }),
  )
  const routeCounter = (counter: typeof replays) =>
    keptSeries((route: string) => counter.labels({ path_template: route }))
  const replaySeries = routeCounter(replays)
  const rateLimitedSeries = routeCounter(rateLimited)
  const loadShedSeries = routeCounter(loadShed)
  const abortedSeries = keptSeries((request: FastifyRequest) =>
    aborted.labels({ method: request.method, path_template: routeTemplate(request) }),
  )
  // Bounded: seven reasons × the configured key ids and "none".
  const refusalSeries = keptSeries((reason: RefusalReason, id: string) => refusals.labels({ reason, key_id: id }))
  const operationSeries = keptSeries((operation: string) => dbDuration.labels({ operation }))

  // Off the success path: only error answers come here.
  function countError(request: FastifyRequest, reply: FastifyReply, status: number) {
    const error = reply.answeredError
    const template = routeTemplate(request)
    if (error) {
      errorSeries(`${status} ${error.key}`, status, error).inc()
      if (IDEMPOTENCY_CONFLICTS.has(error.key)) conflicts.labels({ key: error.key }).inc()
    }
    if (status === 429) rateLimitedSeries(template, template).inc()
    if (error?.key === LOAD_SHED) loadShedSeries(template, template).inc()
  }

  return {
    // A success that is not a replay costs one comparison. A callback hook: no promise per request.
    countAnswer(request, reply, done) {
      const status = reply.statusCode
      if (status >= 400) countError(request, reply, status)
      else if (reply.hasHeader('idempotent-replayed')) {
        const template = routeTemplate(request)
        replaySeries(template, template).inc()
      }
      done()
    },
    // Answers that never reach onResponse: given at the HTTP edge (src/http/server-options.ts),
    // or not given because the client left (src/plugins/app/error-handler.ts).
    countEdgeAnswer(key) {
      const entry = catalogueEntry(key)
      errorSeries(`${entry.status} ${entry.key}`, entry.status, entry).inc()
    },
    countAbortedRequest(request) {
      abortedSeries(`${request.method} ${request.routeOptions.url}`, request).inc()
    },
    countRefusal(reason, keyId) {
      const id = keyId ?? NO_KEY
      refusalSeries(`${reason} ${id}`, reason, id).inc()
    },
    observeDbOperation(operation, seconds) {
      operationSeries(operation, operation).observe(seconds)
    },
  }
}

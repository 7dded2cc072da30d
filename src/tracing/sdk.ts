// The OpenTelemetry SDK, loaded only when tracing is on (see index.ts). NodeSDK reads the
// standard variables: exporter endpoint and protocol, sampler (e.g. parentbased_traceidratio),
// batch span processor timing, propagators (W3C traceparent by default), resource attributes.
import { FastifyOtelInstrumentation } from '@fastify/otel'
import { type Context, context, trace } from '@opentelemetry/api'
import { NodeSDK } from '@opentelemetry/sdk-node'
import type { FastifyInstance } from 'fastify'
import type { Sql } from '../db/client.js'
import { routeTemplate } from '../route-template.js'
import { traceRateLimitStore, type DecisionStore } from './rate-limit.js'
import { traceSql } from './sql.js'

export interface Tracing {
  /** Called first on the app: a server span per request, trace ids on its log lines. */
  register(app: FastifyInstance): Promise<void>
  /** The postgres.js client whose statements become child spans of the request's span. */
  traceSql<T extends Sql>(sql: T): T
  /** The rate-limit store whose decisions become child spans. */
  traceRateLimitStore<T extends DecisionStore>(store: T): T
  /** Exports the spans still buffered; called on shutdown. */
  shutdown(): Promise<void>
}

/** Probes and metrics are scraped every few seconds: never traced. */
const UNTRACED = new Set(['/live', '/ready', '/metrics'])
const untraced = ({ url }: { url: string }) => {
  const q = url.indexOf('?')
  return UNTRACED.has(q === -1 ? url : url.slice(0, q))
}

export function startSdk(env: NodeJS.ProcessEnv): Tracing {
  const fastifyOtel = new FastifyOtelInstrumentation({
    // One span per request, not one per hook nor one for the handler: hooks are many and short,
    // and a wrapper span costs a span and a context switch on every request, sampled or not.
    // The statements' spans show where a request's time goes.
    instrumentHooks: false,
    instrumentHandler: false,
    // An exception event carries the message and stack; neither belongs in a span.
    recordExceptions: false,
    ignorePaths: untraced,
    requestHook: (span, request) => {
      // An unsampled request's span records nothing: no work for it.
      if (!span.isRecording()) return
      const route = routeTemplate(request)
      span.updateName(`${request.method} ${route}`)
      // url.path would carry identifiers (and the query string): the route template instead.
      span.setAttribute('url.path', route)
    },
  })
  const sdk = new NodeSDK({
    ...(env.OTEL_SERVICE_NAME ? {} : { serviceName: 'study-service' }),
    instrumentations: [fastifyOtel],
  })
  sdk.start()
  const tracer = trace.getTracer('study-service')
  return {
    register: registerTracing(fastifyOtel),
    traceSql: (sql) => traceSql(sql, tracer),
    traceRateLimitStore: (store) => traceRateLimitStore(store, tracer),
    shutdown: () => sdk.shutdown(),
  }
}

/**
 * @fastify/otel's plugin, plus: a sampled request's log lines carry trace_id and span_id (a
 * child logger, bound once per sampled request, costs nothing per line), and the request's
 * context is entered again after the body is read (body events run outside it), so that the
 * statements of later hooks and the handler are children of the request's span.
 */
/** The request's OpenTelemetry context, kept by the onRequest hook for the preValidation one. */
const kContext = Symbol('tracing context')

function registerTracing(fastifyOtel: FastifyOtelInstrumentation) {
  return async (app: FastifyInstance) => {
    await app.register(fastifyOtel.plugin())
    app.decorateRequest(kContext, null)
    // Runs inside @fastify/otel's onRequest context: the active context is the request's.
    app.addHook('onRequest', (request, reply, next) => {
      const ctx = context.active()
      const span = trace.getSpan(ctx)
      if (span === undefined)
        return next() // an untraced path
        // Kept for an unsampled request too: entered again in preValidation, it keeps the
        // request out of whatever context a shared callback (a batched Redis call) ran in, so
        // that its statements never land in another, sampled request's trace.
      ;(request as unknown as Record<symbol, Context>)[kContext] = ctx
      if (span.isRecording()) {
        const { traceId, spanId } = span.spanContext()
        const log = request.log.child({ trace_id: traceId, span_id: spanId })
        request.log = log
        reply.log = log
      }
      next()
    })
    app.addHook('preValidation', (request, _reply, next) => {
      const ctx = (request as unknown as Record<symbol, Context | null>)[kContext]
      if (ctx) return context.with(ctx, next)
      next()
    })
  }
}

// The server span of a request. The sampling decision comes first, when Fastify makes the
// request's child logger: `tracer.startSpan` asks the SDK's sampler (OTEL_TRACES_SAMPLER,
// parent-based on the caller's traceparent), and a sampled request's one child logger carries
// its trace and span ids beside the request id (no second child logger per request). An
// unsampled request gets nothing more: no context entered, no attribute. Only a sampled request
// pays for its span. (@fastify/otel builds and enters a context for every request, sampled or
// not: bench/results.md, "Tracing cost".)
import type { IncomingMessage } from 'node:http'
import {
  type Context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
  type Tracer,
} from '@opentelemetry/api'
import type { FastifyInstance } from 'fastify'
import { routeTemplate } from '../route-template.js'
import { sampledRequest } from './sampled-request.js'

interface TracedRequest {
  span: Span
  context: Context
}

const kTraced: unique symbol = Symbol('traced request')

declare module 'fastify' {
  interface FastifyRequest {
    [kTraced]: TracedRequest | null
  }
}

// From the child logger's factory (which sees only Node's request) to the request's hooks.
const startedSpans = new WeakMap<IncomingMessage, TracedRequest>()

/** Probes and metrics are scraped every few seconds: never traced. */
const UNTRACED = new Set(['/live', '/ready', '/metrics'])
const untraced = (url: string) => {
  const q = url.indexOf('?')
  return UNTRACED.has(q === -1 ? url : url.slice(0, q))
}

/** The span of a request the sampler records, or undefined (probes, unsampled requests). */
function startServerSpan(tracer: Tracer, raw: IncomingMessage): TracedRequest | undefined {
  if (untraced(raw.url ?? '/')) return undefined
  const parent = propagation.extract(ROOT_CONTEXT, raw.headers)
  const span = tracer.startSpan('request', { kind: SpanKind.SERVER }, parent)
  if (!span.isRecording()) return undefined
  return { span, context: trace.setSpan(parent, span) }
}

/** Registered first on the app, so that its span is open before any other hook runs. */
export function registerServerSpans(app: FastifyInstance, tracer: Tracer): void {
  // Fastify makes one child logger per request, before any hook: the span starts there, so
  // that every log line of a sampled request names its trace and span.
  app.decorateRequest(kTraced, null)
  app.setChildLoggerFactory(function tracedChildLogger(logger, bindings, options, raw) {
    const traced = startServerSpan(tracer, raw as IncomingMessage)
    if (!traced) return logger.child(bindings, options)
    startedSpans.set(raw as IncomingMessage, traced)
    const { traceId, spanId } = traced.span.spanContext()
    return logger.child({ ...bindings, trace_id: traceId, span_id: spanId }, options)
  })

  app.addHook('onRequest', (request, _reply, done) => {
    const traced = startedSpans.get(request.raw)
    if (!traced) return done()
    request[kTraced] = traced
    const route = routeTemplate(request)
    traced.span.updateName(`${request.method} ${route}`)
    // url.path would carry identifiers (and the query string): the route template instead.
    traced.span.setAttributes({ 'http.request.method': request.method, 'http.route': route, 'url.path': route })
    sampledRequest.run(traced.context, done)
  })

  // The body is read in the connection's context, not the request's: a sampled request's
  // context is entered again before validation, the handler and its statements.
  app.addHook('preValidation', (request, _reply, done) => {
    const traced = request[kTraced]
    if (traced) return sampledRequest.run(traced.context, done)
    done()
  })

  app.addHook('onResponse', (request, reply, done) => {
    const traced = request[kTraced]
    if (traced) {
      const status = reply.statusCode
      traced.span.setAttribute('http.response.status_code', status)
      // A 5xx is the server's error; the error's message never goes into the span.
      if (status >= 500) {
        traced.span.setAttribute('error.type', String(status))
        traced.span.setStatus({ code: SpanStatusCode.ERROR })
      }
      traced.span.end()
    }
    done()
  })
}

// The server span of a request. The sampling decision comes first: `tracer.startSpan` asks the
// SDK's sampler (OTEL_TRACES_SAMPLER, parent-based on the caller's traceparent), and an unsampled
// request gets nothing more: no context entered, no attribute, no logger binding. Only a sampled
// request pays for its span. (@fastify/otel builds and enters a context for every request,
// sampled or not: docs/performance.md, "Tracing".)
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
import type { FastifyInstance, FastifyReply } from 'fastify'
import { timedOutByServer } from '../http/server-options.js'
import { addLogBindings } from '../library-types.js'
import { routeTemplate } from '../route-template.js'
import { sampledRequest } from './sampled-request.js'

/** A sampled request's context (its span in it), entered again after the body is read. */
const kTraced: unique symbol = Symbol('traced request')

declare module 'fastify' {
  interface FastifyRequest {
    [kTraced]: Context | null
  }
}

/** Probes and metrics are scraped every few seconds: never traced. */
const UNTRACED = new Set(['/live', '/ready', '/metrics'])
const untraced = (url: string) => {
  const q = url.indexOf('?')
  return UNTRACED.has(q === -1 ? url : url.slice(0, q))
}

/** Registered first on the app, so that its span is open before any other hook runs. */
export function registerServerSpans(app: FastifyInstance, tracer: Tracer): void {
  app.decorateRequest(kTraced, null)

  app.addHook('onRequest', (request, reply, done) => {
    if (untraced(request.url)) return done()
    const parent = propagation.extract(ROOT_CONTEXT, request.headers)
    const span = tracer.startSpan('request', { kind: SpanKind.SERVER }, parent)
    if (!span.isRecording()) return done()
    const route = routeTemplate(request)
    span.updateName(`${request.method} ${route}`)
    // url.path would carry identifiers (and the query string): the route template instead.
    span.setAttributes({ 'http.request.method': request.method, 'http.route': route, 'url.path': route })
    const context = trace.setSpan(parent, span)
    request[kTraced] = context
    // Every log line of a sampled request names its trace and span: added to the bindings of
    // the child logger Fastify made for the request (and shares with its reply), not a new one.
    const { traceId, spanId } = span.spanContext()
    addLogBindings(request.log, { trace_id: traceId, span_id: spanId })
    // Ended when its response closes, answered or not (an unanswered request gets no onResponse).
    reply.raw.once('close', () => endSpan(span, reply))
    sampledRequest.run(context, done)
  })

  // The body is read in the connection's context, not the request's: a sampled request's
  // context is entered again before validation, the handler and its statements.
  app.addHook('preValidation', (request, _reply, done) => {
    const context = request[kTraced]
    if (context) return sampledRequest.run(context, done)
    done()
  })
}

/**
 * Ends a sampled request's span when its response closes. Answered: the status sent (a 5xx is
 * the server's error; the error's message never goes into the span). Unanswered: either the
 * request deadline stopped it (its client got the 408 the HTTP edge wrote,
 * src/http/server-options.ts: a 4xx, no error on a server span) or its client left (an upload
 * cut short): no status reached it, an error.
 */
function endSpan(span: Span, reply: FastifyReply): void {
  if (reply.raw.writableFinished) {
    const status = reply.statusCode
    span.setAttribute('http.response.status_code', status)
    if (status >= 500) {
      span.setAttribute('error.type', String(status))
      span.setStatus({ code: SpanStatusCode.ERROR })
    }
  } else if (timedOutByServer(reply.request.raw.socket)) {
    span.setAttribute('http.response.status_code', 408)
  } else {
    span.setAttribute('error.type', 'client_aborted')
    span.setStatus({ code: SpanStatusCode.ERROR })
  }
  span.end()
}

// The server span of a request. The sampling decision comes first: `tracer.startSpan` asks the
// SDK's sampler (OTEL_TRACES_SAMPLER, parent-based on the caller's traceparent), and an unsampled
// request gets nothing more: no context entered, no attribute, no logger binding. Only a sampled
// request pays for its span. (@fastify/otel builds and enters a context for every request,
// sampled or not: bench/results.md, "Tracing cost".)
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
    const traced = { span, context: trace.setSpan(parent, span) }
    request[kTraced] = traced
    // Every log line of a sampled request names its trace and span: added to the bindings of
    // the child logger Fastify made for the request (and shares with its reply), not a new one.
    const { traceId, spanId } = span.spanContext()
    addLogBindings(request.log, { trace_id: traceId, span_id: spanId })
    // A request whose connection closes before its answer is sent gets no onResponse.
    reply.raw.once('close', () => endUnanswered(span, reply))
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
    if (traced?.span.isRecording()) {
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

/**
 * Ends the span of a request whose connection closed before its answer went out, so the trace
 * named in its log lines is still exported. Either the server's request deadline closed it (the
 * client got the 408 written at the HTTP edge, src/http/server-options.ts: a 4xx, so no error on
 * a server span) or the client left (an upload cut short): no status reached it, an error.
 */
function endUnanswered(span: Span, reply: FastifyReply): void {
  if (!span.isRecording() || reply.raw.writableFinished) return
  if (timedOutByServer(reply.request.raw.socket)) {
    span.setAttribute('http.response.status_code', 408)
  } else {
    span.setAttribute('error.type', 'client_aborted')
    span.setStatus({ code: SpanStatusCode.ERROR })
  }
  span.end()
}

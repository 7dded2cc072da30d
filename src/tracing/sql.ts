// Child spans for postgres.js statements, from the driver's diagnostics channel
// (src/db/statement-channel.ts): no wrapper around the client. A span is made only inside a
// recording span (a sampled request): statements of unsampled requests, timers and migrations
// cost one context lookup. Its name is the statement's operation and table (`SELECT users`);
// `db.query.text` is the text postgres.js sent, whose values are $n parameters: no parameter
// value, row or error message ever reaches an attribute.
import { type Span, SpanKind, SpanStatusCode, type Tracer } from '@opentelemetry/api'
import { describeStatement } from '../db/statement-names.js'
import { type StatementContext, watchStatements } from '../db/statement-channel.js'
import { sampledRequest } from './sampled-request.js'

/** Spans each statement made inside a sampled request until the returned function is called. */
export function traceStatements(tracer: Tracer): () => void {
  const spans = new WeakMap<StatementContext, Span>()
  return watchStatements({
    // Runs in the async context of the code that made the statement: its request's, if any.
    start(statement) {
      const parent = sampledRequest.getStore()
      if (parent) spans.set(statement, tracer.startSpan('sql', { kind: SpanKind.CLIENT }, parent))
    },
    error(statement) {
      const span = spans.get(statement)
      if (!span) return
      // The SQLSTATE only: a message may quote a value (`invalid input syntax for type uuid: "…"`).
      span.setStatus({ code: SpanStatusCode.ERROR })
      span.setAttribute('error.type', statement.error?.code ?? 'Error')
    },
    asyncEnd(statement) {
      const span = spans.get(statement)
      if (!span) return
      spans.delete(statement)
      const { name, attributes } = describeStatement(statement.query ?? '')
      span.updateName(name)
      span.setAttributes(attributes)
      span.end()
    },
  })
}

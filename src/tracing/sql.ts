// Child spans for postgres.js statements: postgres.js has no official instrumentation, so the
// client is wrapped at its boundary (the pool, reserved connections, transactions). A span is
// made only inside a recording span (a sampled request): statements of unsampled requests,
// timers and migrations cost one context lookup. Its name is the statement's operation and
// table (`SELECT users`); `db.query.text` is the text postgres.js sent, whose values are $n
// parameters: no parameter value, row or error message ever reaches an attribute.
import { type Attributes, type Context, SpanKind, SpanStatusCode, type Tracer } from '@opentelemetry/api'
import type { Sql } from '../db/client.js'
import { sampledRequest } from './sampled-request.js'

/** The parts of a postgres.js Query this wrapper touches (lazy: sent on then() or execute()). */
interface QueryInternals {
  executed: boolean
  /** The text sent, with $n placeholders; set when the query is built. */
  string?: string
  handle(): Promise<void>
  resolve(value: unknown): void
  reject(err: unknown): void
}

export interface StatementDescription {
  name: string
  attributes: Attributes
}

const descriptions = new Map<string, StatementDescription>()
const MAX_DESCRIPTIONS = 1000

const TARGET: Record<string, RegExp> = {
  INSERT: /^insert\s+into\s+([a-z_][\w.]*)/i,
  UPDATE: /^update\s+([a-z_][\w.]*)/i,
  DELETE: /^delete\s+from\s+([a-z_][\w.]*)/i,
}
// A read's first table, named after FROM or JOIN (`is distinct from null` names none).
const FROM = /\b(?:from|join)\s+(?!null\b)([a-z_][\w.]*)/i
// A WITH statement is named by its first data-modifying statement, if it has one.
const MODIFIES = /\b(insert\s+into|update|delete\s+from)\s+([a-z_][\w.]*)/i

/** Operation and table of a statement's text, cached per text (the texts are the code's own). */
export function describeStatement(text: string): StatementDescription {
  let found = descriptions.get(text)
  if (found) return found
  const trimmed = text.trim()
  let operation = (/^\w+/.exec(trimmed)?.[0] ?? 'SQL').toUpperCase()
  let table = (TARGET[operation] ?? FROM).exec(trimmed)?.[1]
  const modifies = operation === 'WITH' ? MODIFIES.exec(trimmed) : null
  if (modifies) {
    operation = modifies[1]!.split(/\s+/)[0]!.toUpperCase()
    table = modifies[2]
  }
  found = {
    name: table ? `${operation} ${table}` : operation,
    attributes: {
      'db.system.name': 'postgresql',
      'db.operation.name': operation,
      ...(table ? { 'db.collection.name': table } : {}),
      'db.query.text': trimmed.replace(/\s+/g, ' '),
    },
  }
  if (descriptions.size >= MAX_DESCRIPTIONS) descriptions.clear()
  descriptions.set(text, found)
  return found
}

function traceQuery(query: QueryInternals, tracer: Tracer, parent: Context): void {
  const handle = query.handle
  query.handle = function tracedHandle(this: QueryInternals) {
    if (!this.executed) startSpan(this, tracer, parent)
    return handle.call(this)
  }
}

function startSpan(query: QueryInternals, tracer: Tracer, parent: Context): void {
  const span = tracer.startSpan('sql', { kind: SpanKind.CLIENT }, parent)
  const finish = () => {
    const { name, attributes } = describeStatement(query.string ?? '')
    span.updateName(name)
    span.setAttributes(attributes)
    span.end()
  }
  const { resolve, reject } = query
  query.resolve = (value) => {
    finish()
    resolve(value)
  }
  query.reject = (err) => {
    // The SQLSTATE only: a message may quote a value (`invalid input syntax for type uuid: "…"`).
    span.setStatus({ code: SpanStatusCode.ERROR })
    span.setAttribute('error.type', (err as { code?: string })?.code ?? 'Error')
    finish()
    reject(err)
  }
}

const isTemplate = (first: unknown) => Array.isArray((first as { raw?: unknown } | undefined)?.raw)

/**
 * `sql` whose statements (also on reserved connections, where the service runs its transactions) are traced.
 * A plain function in front of postgres.js' own (not a Proxy, whose traps V8 cannot inline):
 * every other property (`json`, `array`, `options`, `end`, a reserved connection's `release`)
 * is postgres.js' own, copied (not reached through a changed prototype: a sampled transaction
 * wraps its reserved connection, and changing a prototype costs V8 far more than a few
 * properties). A connection reserved outside a sampled
 * request is handed over as postgres.js made it: its statements cost nothing. Transactions are
 * BEGIN .. COMMIT statements on a reserved connection (src/plugins/app/database.ts), each a span.
 */
export function traceSql<T extends Sql>(sql: T, tracer: Tracer): T {
  const traced = function tracedSql(first: unknown, ...rest: unknown[]) {
    const result = (sql as unknown as (...args: unknown[]) => unknown)(first, ...rest)
    // Checked when the statement is made (it is sent in the same request): an unsampled
    // request's statements are left as they are.
    const parent = isTemplate(first) ? sampledRequest.getStore() : undefined
    if (parent) traceQuery(result as QueryInternals, tracer, parent)
    return result
  }
  Object.assign(traced, sql)
  const own = traced as unknown as Record<string, unknown>
  own.unsafe = (...args: Parameters<Sql['unsafe']>) => {
    const query = sql.unsafe(...args)
    const parent = sampledRequest.getStore()
    if (parent) traceQuery(query as unknown as QueryInternals, tracer, parent)
    return query
  }
  own.reserve = async () => {
    const sampled = sampledRequest.getStore() !== undefined
    const reserved = await sql.reserve()
    return sampled ? traceSql(reserved as unknown as Sql, tracer) : reserved
  }
  return traced as unknown as T
}

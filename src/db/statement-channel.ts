// postgres.js publishes every statement on the diagnostics_channel tracing channel
// `postgres:query` (node_modules/postgres/src/diagnostics.js): `start` in the async context of
// the code that made the statement, `error` if it fails, `asyncEnd` once it settles, all with
// one context object. Its `query` is the text sent ($n placeholders); `parameters` stays
// undefined unless the client runs with `debug: true`, which the service never does
// (src/db/client.ts). Nothing is published while nobody subscribes.
import { tracingChannel } from 'node:diagnostics_channel'

/** What the service reads of a statement's context object. */
export interface StatementContext {
  /** The text sent, with $n placeholders (null for a statement that could not be built). */
  query: string | null
  /** performance.now() when the statement was made and when it settled. */
  queued: number
  complete: number | null
  /** Set on `error`: a PostgresError (its SQLSTATE in `code`) or a connection error. */
  error?: { code?: string }
}

export interface StatementHandlers {
  start?(statement: StatementContext): void
  error?(statement: StatementContext): void
  asyncEnd?(statement: StatementContext): void
}

const statements = tracingChannel<StatementContext, StatementContext>('postgres:query')

/** Subscribes `handlers` to every statement of the process; returns the unsubscribe. */
export function watchStatements(handlers: StatementHandlers): () => void {
  const all = { start() {}, end() {}, asyncStart() {}, asyncEnd() {}, error() {}, ...handlers }
  statements.subscribe(all)
  return () => {
    statements.unsubscribe(all)
  }
}

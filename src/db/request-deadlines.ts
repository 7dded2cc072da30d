// Binds each operation's handler to a database deadline of its own (src/db/deadline.ts): the
// deadline starts when the handler starts, after the checks before it (rate limit, key, body).
import { type DatabaseDeadlineSettings, runWithDatabaseDeadline } from './deadline.js'

type Handler = (this: unknown, ...args: never[]) => unknown

export function withDatabaseDeadlines<T extends Record<string, Handler>>(
  settings: DatabaseDeadlineSettings,
  handlers: T,
): T {
  const bound: Record<string, Handler> = {}
  for (const [operationId, handler] of Object.entries(handlers)) {
    bound[operationId] = function (this: unknown, ...args: never[]) {
      return runWithDatabaseDeadline(settings, () => handler.apply(this, args))
    }
  }
  return bound as T
}

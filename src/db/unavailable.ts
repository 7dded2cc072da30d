// Errors that mean "the database cannot answer right now" (answered as 503, not 500): it is
// unreachable, shutting down, out of a resource (no connection slot left, memory, disk), too
// slow (a statement cancelled by its statement_timeout), or read-only because the server is a
// standby (during a failover, before the new primary is promoted).
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EPIPE',
  'EAI_AGAIN',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  // src/db/deadline.ts: the request's database work passed its deadline (or waited too long for a connection).
  'DATABASE_DEADLINE_EXCEEDED',
  // postgres.js 4's own limits (queue_timeout, query_timeout), should they be configured.
  'QUEUE_TIMEOUT',
  'QUERY_TIMEOUT',
])

export function isDatabaseUnavailable(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false
  const code = (err as { code?: unknown }).code
  if (typeof code !== 'string') return false
  // SQLSTATE class 08 (connection exception), class 53 (insufficient resources: 53300 too many
  // connections), 57014 (statement timeout), 57P01..57P03 (shutdown, cannot connect now),
  // 25006 (read_only_sql_transaction: a write reached a server in recovery).
  return (
    NETWORK_CODES.has(code) ||
    code.startsWith('08') ||
    code.startsWith('53') ||
    code === '57014' ||
    code === '25006' ||
    code === '57P01' ||
    code === '57P02' ||
    code === '57P03'
  )
}

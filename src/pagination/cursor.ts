// Opaque keyset cursors: base64url of a small JSON array. Only a position the service could
// have issued is accepted (the caller answers 422 otherwise): the canonical encoding of a real
// instant within years 1..9999 (no Feb 31, no 24:00, no leap second) and a lowercase UUID, as
// PostgreSQL prints them. A year-0 cursor once reached SQL and answered 500.
import { isBoundedDateTime } from '../validation/date-time.js'
import { strictUuid } from '../validation/formats.js'

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/

/** A row's place in a (created_at, uuid) order: the error-log list's and the conspectus list's. */
export interface TimeKeyPosition {
  created_at: string // exact, microseconds, UTC ISO 8601
  id: string
}

export function encodeCursor(position: TimeKeyPosition): string {
  return Buffer.from(JSON.stringify([position.created_at, position.id]), 'utf8').toString('base64url')
}

export function decodeCursor(cursor: string): TimeKeyPosition | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
    if (!Array.isArray(value) || value.length !== 2) return null
    const [createdAt, id] = value
    if (typeof createdAt !== 'string' || !TIMESTAMP.test(createdAt) || !isBoundedDateTime(createdAt)) return null
    if (typeof id !== 'string' || !strictUuid.test(id) || id !== id.toLowerCase()) return null
    const position = { created_at: createdAt, id }
    return encodeCursor(position) === cursor ? position : null
  } catch {
    return null
  }
}

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

/** A lowercase UUID: the id of a row of the error-log and conspectus lists. */
const isLowerUuid = (id: string) => strictUuid.test(id) && id === id.toLowerCase()

/** The position a cursor names, or null; `isId` says which ids the list's rows have. */
export function decodeCursor(cursor: string, isId: (id: string) => boolean = isLowerUuid): TimeKeyPosition | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
    if (!Array.isArray(value) || value.length !== 2) return null
    const [createdAt, id] = value
    if (typeof createdAt !== 'string' || !TIMESTAMP.test(createdAt) || !isBoundedDateTime(createdAt)) return null
    if (typeof id !== 'string' || !isId(id)) return null
    const position = { created_at: createdAt, id }
    return encodeCursor(position) === cursor ? position : null
  } catch {
    return null
  }
}

/** A cursor of a list ordered by a positive integer id (newest first): the id of the last row. */
export function encodeIdCursor(id: number): string {
  return Buffer.from(JSON.stringify([id]), 'utf8').toString('base64url')
}

export function decodeIdCursor(cursor: string): number | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
    if (!Array.isArray(value) || value.length !== 1) return null
    const [id] = value
    if (!Number.isSafeInteger(id) || (id as number) < 1) return null
    return encodeIdCursor(id as number) === cursor ? (id as number) : null
  } catch {
    return null
  }
}

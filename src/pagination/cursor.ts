// Opaque keyset cursors: base64url of a small JSON array. Anything that does not decode to
// the expected shape is rejected (the caller answers 422).
import { strictUuid } from '../validation/formats.js'

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/

export interface TimeKeyPosition {
  created_at: string
  error_log_uuid: string
}

export function encodeCursor(position: TimeKeyPosition): string {
  return Buffer.from(JSON.stringify([position.created_at, position.error_log_uuid]), 'utf8').toString('base64url')
}

export function decodeCursor(cursor: string): TimeKeyPosition | null {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
    if (!Array.isArray(value) || value.length !== 2) return null
    const [createdAt, id] = value
    if (typeof createdAt !== 'string' || !TIMESTAMP.test(createdAt) || Number.isNaN(Date.parse(createdAt))) return null
    if (typeof id !== 'string' || !strictUuid.test(id)) return null
    return { created_at: createdAt, error_log_uuid: id }
  } catch {
    return null
  }
}

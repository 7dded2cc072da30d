import type { Ajv } from 'ajv'
import { isBoundedDateTime } from './date-time.js'
import { isIanaTimeZone } from './time-zone.js'

// ajv-formats' uuid also accepts a `urn:uuid:` prefix, which PostgreSQL's uuid type rejects.
export const strictUuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** JSON Schema extension keywords of the spec; enforced outside Ajv (json-size-limits.ts). */
export const EXTENSION_KEYWORDS = ['x-max-json-bytes']

/** Formats and extension keywords the spec uses beyond ajv-formats' defaults. */
export function addProjectFormats(ajv: Ajv): void {
  ajv.addFormat('uuid', strictUuid)
  ajv.addFormat('iana-time-zone', { type: 'string', validate: isIanaTimeZone })
  ajv.addFormat('date-time', { type: 'string', validate: isBoundedDateTime })
  ajv.addVocabulary(EXTENSION_KEYWORDS)
}

import type { Ajv } from 'ajv'
import { isIanaTimeZone } from './time-zone.js'

// ajv-formats' uuid also accepts a `urn:uuid:` prefix, which PostgreSQL's uuid type rejects.
export const strictUuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Formats the spec uses beyond ajv-formats' defaults (or stricter than them). */
export function addProjectFormats(ajv: Ajv): void {
  ajv.addFormat('uuid', strictUuid)
  ajv.addFormat('iana-time-zone', { type: 'string', validate: isIanaTimeZone })
}

// Every error the service answers comes from the catalogue in spec/openapi.yaml
// (x-error-catalogue), read here through the generated module.
import { errorCatalogue, type ErrorKey } from '../generated/error-catalogue.js'

export type CatalogueEntry = (typeof errorCatalogue)[number]
export type { ErrorKey }

const byKey = new Map<string, CatalogueEntry>(errorCatalogue.map((e) => [e.key, e]))

export function catalogueEntry(key: ErrorKey): CatalogueEntry {
  return byKey.get(key)!
}

/** An error with a catalogued envelope; the error handler sends it as is. */
export class AppError extends Error {
  readonly statusCode: number
  readonly code: string
  readonly key: string
  readonly source: string
  readonly headers: Record<string, string>

  constructor(key: ErrorKey, headers: Record<string, string> = {}) {
    const entry = catalogueEntry(key)
    super(entry.message)
    this.name = 'AppError'
    this.statusCode = entry.status
    this.code = entry.code
    this.key = entry.key
    this.source = entry.source
    this.headers = headers
  }

  envelope() {
    return { code: this.code, key: this.key, message: this.message, source: this.source }
  }
}

export const appError = (key: ErrorKey, headers?: Record<string, string>) => new AppError(key, headers)

/** Validation entries of one group (the operation's x-validation-group). */
export function validationEntries(group: string): CatalogueEntry[] {
  return errorCatalogue.filter((e) => 'group' in e && ([] as readonly string[]).concat(e.group).includes(group))
}

/** The catalogued error a reply answers (`reply.answeredError`): read by the request log and metrics. */
export interface AnsweredError {
  code: string
  key: string
}

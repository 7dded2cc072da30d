// A 422 raised after schema validation (for example an opaque cursor that does not decode);
// the error handler sends it in the same body as schema failures.
import { catalogueEntry } from '../errors.js'
import type { ValidationItem } from './validation-errors.js'

export class RequestValidationError extends Error {
  constructor(readonly items: ValidationItem[]) {
    super('request validation failed')
    this.name = 'RequestValidationError'
  }
}

/** A COMMON_422 item for a query parameter. */
export function invalidQueryParameter(name: string, input: unknown, message: string): RequestValidationError {
  const entry = catalogueEntry('REQUEST_PARAMETER_INVALID')
  return new RequestValidationError([
    {
      code: entry.code,
      key: entry.key,
      message: `query ${name} ${message}`,
      field: name,
      source: 'validation',
      details: { loc: ['query', name], type: 'format', input, ctx: {} },
    },
  ])
}

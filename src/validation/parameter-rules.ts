// Path, query and header parameters around Ajv's coercion: an integer parameter is written as
// plain decimal digits (Ajv would coerce "Infinity", "1e400", "0x10" and "1e3", and its
// minimum/maximum checks skip non-finite values); after coercion, the string rules (no NUL, no
// lone surrogate) and finite, safe numbers.
import type { ErrorObject } from 'ajv'
import { unacceptableNumber, unacceptableString } from './input-rules.js'
import { escapePointer } from './schema-nodes.js'

type Validator = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null }

function ruleErrors(data: unknown, only: Set<string> | null): ErrorObject[] {
  if (data === null || typeof data !== 'object') return []
  const errors: ErrorObject[] = []
  for (const [name, value] of Object.entries(data)) {
    if (only && !only.has(name)) continue
    for (const [i, item] of (Array.isArray(value) ? value.map((v, i) => [i, v] as const) : [[null, value] as const])) {
      const problem = typeof item === 'string' ? unacceptableString(item) : typeof item === 'number' ? unacceptableNumber(item) : null
      if (!problem) continue
      errors.push({
        instancePath: `/${escapePointer(name)}${i === null ? '' : `/${i}`}`,
        schemaPath: typeof item === 'string' ? 'string' : 'type',
        keyword: typeof item === 'string' ? 'string_invalid' : 'type',
        params: {},
        message: problem,
        data: item,
      })
    }
  }
  return errors
}

const DECIMAL_INTEGER = /^[+-]?\d{1,16}$/

type ParameterSchema = { properties?: Record<string, { type?: unknown }> }

/** Integer parameters sent as anything but decimal digits, checked before coercion. */
function integerSpellingErrors(schema: ParameterSchema, data: unknown): ErrorObject[] {
  if (data === null || typeof data !== 'object') return []
  const errors: ErrorObject[] = []
  for (const [name, property] of Object.entries(schema.properties ?? {})) {
    const value = (data as Record<string, unknown>)[name]
    if (property.type !== 'integer' || typeof value !== 'string' || DECIMAL_INTEGER.test(value)) continue
    errors.push({ instancePath: `/${escapePointer(name)}`, schemaPath: 'type', keyword: 'type', params: { type: 'integer' }, message: 'must be a decimal integer', data: value })
  }
  return errors
}

/**
 * Path and query: every value, declared or not. Headers: the declared ones except X-Request-Id,
 * which is replaced when odd, never refused (and Node's parser already refuses NUL in headers).
 */
export function withInputRules(validate: Validator, schema: ParameterSchema, part: 'params' | 'querystring' | 'headers'): Validator {
  const only = part === 'headers' ? new Set(Object.keys(schema.properties ?? {}).filter((name) => name !== 'x-request-id')) : null
  const wrapped: Validator = (data) => {
    const spelling = integerSpellingErrors(schema, data)
    const ok = validate(data)
    const extra = ruleErrors(data, only)
    const errors = [...spelling, ...(ok ? [] : (validate.errors ?? [])), ...extra]
    wrapped.errors = errors.length > 0 ? errors : null
    return errors.length === 0
  }
  return wrapped
}

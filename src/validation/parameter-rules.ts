// Path, query and header parameters around Ajv's coercion: an integer parameter is written as
// plain decimal digits (Ajv would coerce "Infinity", "1e400", "0x10" and "1e3", and its
// minimum/maximum checks skip non-finite values); after coercion, the string rules (no NUL, no
// lone surrogate) and finite, safe numbers.
import type { ErrorObject } from 'ajv'
import { unacceptableNumber, unacceptableString } from './input-rules.js'
import { escapePointer } from './schema-nodes.js'

type Validator = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null }

/** Why one value breaks the string or number rules, or null. */
function problemOf(item: unknown): string | null {
  return typeof item === 'string'
    ? unacceptableString(item)
    : typeof item === 'number'
      ? unacceptableNumber(item)
      : null
}

/** Whether any value breaks the rules: the common answer, found without allocating. */
function anyRuleBroken(data: unknown, only: Set<string> | null): boolean {
  if (data === null || typeof data !== 'object') return false
  const values = data as Record<string, unknown>
  for (const name in values) {
    if (only && !only.has(name)) continue
    const value = values[name]
    if (Array.isArray(value)) {
      for (const item of value) if (problemOf(item)) return true
    } else if (problemOf(value)) return true
  }
  return false
}

function ruleErrors(data: unknown, only: Set<string> | null): ErrorObject[] {
  if (data === null || typeof data !== 'object') return []
  const errors: ErrorObject[] = []
  for (const [name, value] of Object.entries(data)) {
    if (only && !only.has(name)) continue
    for (const [i, item] of Array.isArray(value) ? value.map((v, i) => [i, v] as const) : [[null, value] as const]) {
      const problem = problemOf(item)
      if (!problem) continue
      errors.push({
        instancePath: `/${escapePointer(name)}${i === null ? '' : `/${i}`}`,
        schemaPath: typeof item === 'string' ? 'string' : 'type',
        keyword: typeof item === 'string' ? 'string_invalid' : 'number_invalid',
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
function integerSpellingErrors(integerNames: readonly string[], data: unknown): ErrorObject[] {
  if (integerNames.length === 0 || data === null || typeof data !== 'object') return NONE
  let errors: ErrorObject[] = NONE
  for (const name of integerNames) {
    const value = (data as Record<string, unknown>)[name]
    if (typeof value !== 'string' || DECIMAL_INTEGER.test(value)) continue
    if (errors === NONE) errors = []
    errors.push({
      instancePath: `/${escapePointer(name)}`,
      schemaPath: 'type',
      keyword: 'type',
      params: { type: 'integer' },
      message: 'must be a decimal integer',
      data: value,
    })
  }
  return errors
}

const NONE: ErrorObject[] = []

/**
 * Path and query: every value, declared or not. Headers: the declared ones except X-Request-Id,
 * which is replaced when odd, never refused (and Node's parser already refuses NUL in headers).
 * A valid request, the common case, allocates nothing here; the error lists are built only for
 * a refused one.
 */
export function withInputRules(
  validate: Validator,
  schema: ParameterSchema,
  part: 'params' | 'querystring' | 'headers',
): Validator {
  const only =
    part === 'headers' ? new Set(Object.keys(schema.properties ?? {}).filter((name) => name !== 'x-request-id')) : null
  const integerNames = Object.entries(schema.properties ?? {})
    .filter(([, property]) => property.type === 'integer')
    .map(([name]) => name)
  const wrapped: Validator = (data) => {
    const spelling = integerSpellingErrors(integerNames, data)
    const ok = validate(data)
    if (ok && spelling === NONE && !anyRuleBroken(data, only)) {
      wrapped.errors = null
      return true
    }
    const errors = [...spelling, ...(ok ? [] : (validate.errors ?? [])), ...ruleErrors(data, only)]
    wrapped.errors = errors.length > 0 ? errors : null
    return errors.length === 0
  }
  return wrapped
}

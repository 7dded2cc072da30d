// Path, query and header parameters after Ajv's coercion: the string rules (no NUL, no lone
// surrogate) and finite, safe numbers. Ajv coerces "Infinity" and "1e400" to ±Infinity and its
// minimum/maximum checks skip non-finite values, so a bound alone lets them through.
import type { ErrorObject } from 'ajv'
import { unacceptableNumber, unacceptableString } from './input-rules.js'
import { escapePointer } from './schema-nodes.js'

type Validator = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null }

function ruleErrors(data: unknown): ErrorObject[] {
  if (data === null || typeof data !== 'object') return []
  const errors: ErrorObject[] = []
  for (const [name, value] of Object.entries(data)) {
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

export function withInputRules(validate: Validator): Validator {
  const wrapped: Validator = (data) => {
    const ok = validate(data)
    const extra = ruleErrors(data)
    const errors = [...(ok ? [] : (validate.errors ?? [])), ...extra]
    wrapped.errors = errors.length > 0 ? errors : null
    return errors.length === 0
  }
  return wrapped
}

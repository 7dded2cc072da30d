// A request body's validator: the container guard (cheap, stops early on an oversize array or
// object), then the generated allErrors validator, then the `x-max-json-bytes` limits.
import type { ErrorObject } from 'ajv'
import { containerGuard } from './container-guard.js'
import { sizeLimitsOf, withJsonSizeLimits } from './json-size-limits.js'

/** An Ajv validate function (the generated standalone ones included). */
export type Validator = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null }

export function boundedBodyValidator(schemaName: string, generated: Validator): Validator {
  const guard = containerGuard(schemaName)
  const full = withJsonSizeLimits(generated, sizeLimitsOf(schemaName))
  const validate: Validator = (data) => {
    const early = guard(data)
    if (early) {
      validate.errors = early
      return false
    }
    const ok = full(data)
    validate.errors = ok ? null : full.errors
    return ok
  }
  return validate
}

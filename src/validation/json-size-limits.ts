// `x-max-json-bytes` on a body property caps its size as serialized JSON (UTF-8), a limit JSON
// Schema cannot express. The check wraps the body validator, so an oversize field is a 422
// like any other schema failure (and comes before the Idempotency-Key check).
import type { ErrorObject } from 'ajv'
import { schemas, schemaId } from '../../generated/schemas.js'

type Validator = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null }
type SchemaNode = { $ref?: string; properties?: Record<string, SchemaNode>; 'x-max-json-bytes'?: number }

const byId = new Map<string, SchemaNode>(Object.keys(schemas).map((name) => [schemaId(name), (schemas as Record<string, SchemaNode>)[name]!]))
const resolve = (node: SchemaNode): SchemaNode => (node.$ref ? (byId.get(node.$ref) ?? node) : node)

/** Property -> byte limit for a body schema (top-level properties only). */
export function sizeLimitsOf(schemaName: string): [string, number][] {
  const schema = (schemas as Record<string, SchemaNode>)[schemaName]
  return Object.entries(schema?.properties ?? {})
    .map(([name, node]) => [name, resolve(node)['x-max-json-bytes']] as [string, number | undefined])
    .filter((entry): entry is [string, number] => typeof entry[1] === 'number')
}

export function withJsonSizeLimits(validate: Validator, limits: [string, number][]): Validator {
  if (limits.length === 0) return validate
  const wrapped: Validator = (data) => {
    if (!validate(data)) {
      wrapped.errors = validate.errors
      return false
    }
    const body = data as Record<string, unknown>
    const errors: ErrorObject[] = []
    for (const [field, limit] of limits) {
      if (body[field] === undefined) continue
      const bytes = Buffer.byteLength(JSON.stringify(body[field]), 'utf8')
      if (bytes > limit) {
        errors.push({
          instancePath: `/${field}`,
          schemaPath: `#/properties/${field}/x-max-json-bytes`,
          keyword: 'x-max-json-bytes',
          params: { limit, bytes },
          message: `must be at most ${limit} bytes as JSON`,
          data: undefined,
        })
      }
    }
    wrapped.errors = errors.length ? errors : null
    return errors.length === 0
  }
  return wrapped
}

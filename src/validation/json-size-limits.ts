// `x-max-json-bytes` on a body property caps its size as serialized JSON (UTF-8), a limit JSON
// Schema cannot express. The check runs after the schema validator passes, so an oversize field
// is a 422 like any other schema failure (and comes before the Idempotency-Key check). Limits
// are found at any depth, through arrays (`events[*].payload`).
import type { ErrorObject } from 'ajv'
import { bodySchemaNode, pointerOf, resolve, type SchemaNode } from './schema-nodes.js'

type Validator = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null }
/** A property path from the body root; `*` stands for every item of an array. */
export type SizeLimit = { path: string[]; limit: number }

/** Every `x-max-json-bytes` under a body schema, with its path. */
export function sizeLimitsOf(schemaName: string): SizeLimit[] {
  const limits: SizeLimit[] = []
  const walk = (node: SchemaNode, path: string[], seen: Set<SchemaNode>) => {
    const n = resolve(node)
    if (seen.has(n)) return
    const inner = new Set(seen).add(n)
    if (typeof n['x-max-json-bytes'] === 'number' && path.length > 0)
      limits.push({ path, limit: n['x-max-json-bytes'] })
    for (const [name, child] of Object.entries(n.properties ?? {})) walk(child, [...path, name], inner)
    if (n.items) walk(n.items, [...path, '*'], inner)
  }
  walk(bodySchemaNode(schemaName), [], new Set())
  return limits
}

function oversize(data: unknown, { path, limit }: SizeLimit): ErrorObject[] {
  const errors: ErrorObject[] = []
  // The walk's place (item indexes for '*'), extended and restored in turn: a pointer is made
  // only for a value over its limit.
  const at: (string | number)[] = []
  const visit = (value: unknown, depth: number) => {
    if (value === undefined) return
    if (depth === path.length) {
      const bytes = Buffer.byteLength(JSON.stringify(value), 'utf8')
      if (bytes > limit) {
        errors.push({
          instancePath: pointerOf(at),
          schemaPath: 'x-max-json-bytes',
          keyword: 'x-max-json-bytes',
          params: { limit, bytes },
          message: `must be at most ${limit} bytes as JSON`,
          data: value,
        })
      }
      return
    }
    const step = path[depth]!
    if (step === '*') {
      if (!Array.isArray(value)) return
      for (let i = 0; i < value.length; i++) {
        at.push(i)
        visit(value[i], depth + 1)
        at.pop()
      }
    } else if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.hasOwn(value, step)) {
      at.push(step)
      visit((value as Record<string, unknown>)[step], depth + 1)
      at.pop()
    }
  }
  visit(data, 0)
  return errors
}

export function withJsonSizeLimits(validate: Validator, limits: SizeLimit[]): Validator {
  if (limits.length === 0) return validate
  const wrapped: Validator = (data) => {
    if (!validate(data)) {
      wrapped.errors = validate.errors
      return false
    }
    const errors = limits.flatMap((limit) => oversize(data, limit))
    wrapped.errors = errors.length ? errors : null
    return errors.length === 0
  }
  return wrapped
}

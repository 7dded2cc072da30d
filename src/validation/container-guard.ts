// A cheap walk of the body against the schema's container limits before the allErrors
// validator runs. With allErrors, Ajv keeps validating every item of an array after `maxItems`
// fails (a 1 MiB array of `{}` gave 700,000 errors and a 184 MB answer), and reports every
// unknown property of a huge object. A container over its limit makes the rest moot: the guard
// reports it alone, in time proportional to the schema, not to the input.
import type { ErrorObject } from 'ajv'
import { bodySchemaNode, escapePointer, resolve, type SchemaNode } from './schema-nodes.js'

/** Unknown properties reported before the rest of an object is moot (the 422 item cap). */
const UNKNOWN_PROPERTIES_REPORTED = 50

type Guard = (data: unknown) => ErrorObject[] | null

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v)

const constraining = new WeakMap<SchemaNode, boolean>()

/** Whether a schema node, or anything under it, limits a container's size (memoized). */
function constrains(node: SchemaNode, seen = new Set<SchemaNode>()): boolean {
  const n = resolve(node)
  const known = constraining.get(n)
  if (known !== undefined) return known
  if (seen.has(n)) return false
  seen.add(n)
  const result =
    n.maxItems !== undefined ||
    n.maxProperties !== undefined ||
    n.additionalProperties === false ||
    (n.items !== undefined && constrains(n.items, seen)) ||
    Object.values(n.properties ?? {}).some((child) => constrains(child, seen))
  constraining.set(n, result)
  return result
}

const error = (
  instancePath: string,
  keyword: string,
  params: Record<string, unknown>,
  message: string,
  data: unknown,
): ErrorObject => ({
  instancePath,
  schemaPath: keyword,
  keyword,
  params,
  message,
  data,
})

function check(node: SchemaNode, data: unknown, pointer: string, out: ErrorObject[]): void {
  const n = resolve(node)
  if (Array.isArray(data)) {
    if (n.maxItems !== undefined && data.length > n.maxItems) {
      out.push(error(pointer, 'maxItems', { limit: n.maxItems }, `must NOT have more than ${n.maxItems} items`, data))
      return
    }
    if (n.items && constrains(n.items))
      for (let i = 0; i < data.length; i++) check(n.items, data[i], `${pointer}/${i}`, out)
    return
  }
  if (!isObject(data)) return
  const keys = Object.keys(data)
  if (n.maxProperties !== undefined && keys.length > n.maxProperties) {
    out.push(
      error(
        pointer,
        'maxProperties',
        { limit: n.maxProperties },
        `must NOT have more than ${n.maxProperties} properties`,
        data,
      ),
    )
    return
  }
  const declared = n.properties ?? {}
  if (n.additionalProperties === false && keys.length > Object.keys(declared).length + UNKNOWN_PROPERTIES_REPORTED) {
    for (const key of keys.filter((k) => !Object.hasOwn(declared, k)).slice(0, UNKNOWN_PROPERTIES_REPORTED)) {
      out.push(
        error(
          pointer,
          'additionalProperties',
          { additionalProperty: key },
          'must NOT have additional properties',
          data,
        ),
      )
    }
    return
  }
  for (const key of keys) {
    const child = declared[key]
    if (child && constrains(child)) check(child, data[key], `${pointer}/${escapePointer(key)}`, out)
  }
}

/** The guard for one body schema; null from it means "no container over its limit". */
export function containerGuard(schemaName: string): Guard {
  const root = bodySchemaNode(schemaName)
  return (data) => {
    const out: ErrorObject[] = []
    check(root, data, '', out)
    return out.length > 0 ? out : null
  }
}

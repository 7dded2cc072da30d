// A cheap walk of the body against the schema's container limits before the allErrors
// validator runs. With allErrors, Ajv keeps validating every item of an array after `maxItems`
// fails (a 1 MiB array of `{}` gave 700,000 errors and a 184 MB answer), and reports every
// unknown property of a huge object. A container over its limit makes the rest moot: the guard
// reports it alone, in time proportional to the schema, not to the input.
import type { ErrorObject } from 'ajv'
import { bodySchemaNode, pointerOf, resolve, type SchemaNode } from './schema-nodes.js'

/** Unknown properties reported before the rest of an object is moot (the 422 item cap). */
const UNKNOWN_PROPERTIES_REPORTED = 50

type Guard = (data: unknown) => ErrorObject[] | null

/** What the walk needs of one schema node: its limits, and only the children that hold one. */
interface Limits {
  maxItems: number | undefined
  maxProperties: number | undefined
  /** Declared property names, when unknown ones are refused (additionalProperties: false). */
  closed: Set<string> | null
  /** Array items, when they (or anything under them) hold a limit. */
  items: Limits | null
  /** Declared properties that (or anything under them) hold a limit. */
  properties: [name: string, limits: Limits][]
}

const limitsOfNode = new WeakMap<SchemaNode, Limits | null>()

/** A node's limits, or null when nothing at or under it limits a container (memoized). */
function limitsOf(node: SchemaNode, seen = new Set<SchemaNode>()): Limits | null {
  const n = resolve(node)
  if (limitsOfNode.has(n)) return limitsOfNode.get(n)!
  if (seen.has(n)) return null
  seen.add(n)
  const items = n.items ? limitsOf(n.items, seen) : null
  const properties = Object.entries(n.properties ?? {})
    .map(([name, child]) => [name, limitsOf(child, seen)] as [string, Limits | null])
    .filter((entry): entry is [string, Limits] => entry[1] !== null)
  const closed = n.additionalProperties === false ? new Set(Object.keys(n.properties ?? {})) : null
  const limits =
    n.maxItems !== undefined || n.maxProperties !== undefined || closed || items || properties.length > 0
      ? { maxItems: n.maxItems, maxProperties: n.maxProperties, closed, items, properties }
      : null
  limitsOfNode.set(n, limits)
  return limits
}

const error = (
  path: (string | number)[],
  keyword: string,
  params: Record<string, unknown>,
  message: string,
  data: unknown,
): ErrorObject => ({
  // Built only for a failure: a valid body's walk makes no strings.
  instancePath: pointerOf(path),
  schemaPath: keyword,
  keyword,
  params,
  message,
  data,
})

/** `path` is the walk's place, extended and restored in turn. */
function check(n: Limits, data: unknown, path: (string | number)[], out: ErrorObject[]): void {
  if (data === null || typeof data !== 'object') return
  if (Array.isArray(data)) {
    if (n.maxItems !== undefined && data.length > n.maxItems) {
      out.push(error(path, 'maxItems', { limit: n.maxItems }, `must NOT have more than ${n.maxItems} items`, data))
      return
    }
    if (n.items) {
      for (let i = 0; i < data.length; i++) {
        path.push(i)
        check(n.items, data[i], path, out)
        path.pop()
      }
    }
    return
  }
  const object = data as Record<string, unknown>
  if (n.maxProperties !== undefined || n.closed) {
    const keys = Object.keys(object)
    if (n.maxProperties !== undefined && keys.length > n.maxProperties) {
      const message = `must NOT have more than ${n.maxProperties} properties`
      out.push(error(path, 'maxProperties', { limit: n.maxProperties }, message, data))
      return
    }
    const closed = n.closed
    if (closed && keys.length > closed.size + UNKNOWN_PROPERTIES_REPORTED) {
      for (const key of keys.filter((k) => !closed.has(k)).slice(0, UNKNOWN_PROPERTIES_REPORTED)) {
        const params = { additionalProperty: key }
        out.push(error(path, 'additionalProperties', params, 'must NOT have additional properties', data))
      }
      return
    }
  }
  for (const [name, limits] of n.properties) {
    if (!Object.hasOwn(object, name)) continue
    path.push(name)
    check(limits, object[name], path, out)
    path.pop()
  }
}

/** The guard for one body schema; null from it means "no container over its limit". */
export function containerGuard(schemaName: string): Guard {
  const root = limitsOf(bodySchemaNode(schemaName))
  if (!root) return () => null
  return (data) => {
    const out: ErrorObject[] = []
    check(root, data, [], out)
    return out.length > 0 ? out : null
  }
}

// Before JSON.parse: the body's top-level arrays that the schema caps with `maxItems` are
// counted on the text. An array over its cap makes the rest moot, so the body is refused
// (422, the keyword's item) without building its items: a 1 MiB array of `{}` is 349,000
// objects to allocate, which alone takes longer than the answer should.
import type { ErrorObject } from 'ajv'
import { operations, type OperationInfo } from '../../generated/operations.js'
import { bodySchemaNode, resolve } from './schema-nodes.js'
import { closingQuote } from './json-text.js'

/** `METHOD /url` -> top-level property -> maxItems, for the bodies that declare any. */
const capsByRoute = new Map<string, Map<string, number>>()
for (const op of Object.values(operations as Record<string, OperationInfo>)) {
  if (!op.bodySchema) continue
  const caps = new Map<string, number>()
  for (const [name, node] of Object.entries(bodySchemaNode(op.bodySchema).properties ?? {})) {
    const maxItems = resolve(node).maxItems
    if (maxItems !== undefined) caps.set(name, maxItems)
  }
  if (caps.size > 0) capsByRoute.set(`${op.method} ${op.url}`, caps)
}

/** The maxItems failure of a top-level array with more items than its cap, or null. */
export function oversizeTopLevelArray(method: string, url: string, text: string): ErrorObject | null {
  const caps = capsByRoute.get(`${method} ${url}`)
  if (!caps) return null
  let depth = 0
  let key: string | null = null
  let expectKey = false
  let counting: { key: string; limit: number; commas: number } | null = null
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      const end = closingQuote(text, i)
      if (end < 0) return null
      if (depth === 1 && expectKey) {
        try {
          key = JSON.parse(text.slice(i, end + 1)) as string
        } catch {
          return null // not JSON: the parser answers it
        }
        expectKey = false
      }
      i = end
    } else if (c === 0x7b || c === 0x5b) {
      depth++
      if (depth === 1) {
        if (c !== 0x7b) return null
        expectKey = true
      } else if (depth === 2 && c === 0x5b && key !== null && caps.has(key)) {
        counting = { key, limit: caps.get(key)!, commas: 0 }
      }
    } else if (c === 0x7d || c === 0x5d) {
      if (depth === 2) counting = null
      depth--
    } else if (c === 0x2c) {
      if (depth === 1) expectKey = true
      else if (depth === 2 && counting && ++counting.commas >= counting.limit) {
        return {
          instancePath: `/${counting.key}`,
          schemaPath: 'maxItems',
          keyword: 'maxItems',
          params: { limit: counting.limit },
          message: `must NOT have more than ${counting.limit} items`,
          data: undefined,
        }
      }
    }
  }
  return null
}

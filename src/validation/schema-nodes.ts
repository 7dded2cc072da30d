// The generated component schemas as a tree the body checks can walk (refs resolved by id).
import { schemas, schemaId } from '../../generated/schemas.js'

export interface SchemaNode {
  $ref?: string
  type?: string | readonly string[]
  properties?: Record<string, SchemaNode>
  additionalProperties?: boolean | SchemaNode
  items?: SchemaNode
  maxItems?: number
  maxProperties?: number
  'x-max-json-bytes'?: number
}

const all = schemas as unknown as Record<string, SchemaNode>
const byId = new Map<string, SchemaNode>(Object.keys(all).map((name) => [schemaId(name), all[name]!]))

export const resolve = (node: SchemaNode): SchemaNode => (node.$ref ? (byId.get(node.$ref) ?? node) : node)

export function bodySchemaNode(name: string): SchemaNode {
  const node = all[name]
  if (!node) throw new Error(`no component schema ${name}`)
  return node
}

export const escapePointer = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1')

/** The JSON pointer of a path of property names and item indexes. */
export const pointerOf = (path: readonly (string | number)[]) =>
  path.map((s) => `/${typeof s === 'number' ? s : escapePointer(s)}`).join('')

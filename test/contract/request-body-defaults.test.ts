// No request-body field declares a `default`: openapi-typescript (with its default flags) and
// other generators make a field that has one required, so a client could not leave out what the
// service lets it leave out. What leaving a field out means goes in its description instead.
import t from 'tap'
import { readSpec } from '../../src/spec.js'

type Node = Record<string, unknown>
const spec = readSpec() as unknown as Node

/** The object a local $ref points to. */
const resolve = (ref: string): Node =>
  ref
    .slice(2)
    .split('/')
    .reduce<Node>((node, part) => node[part.replaceAll('~1', '/').replaceAll('~0', '~')] as Node, spec)

/** JSON pointers of every `default` under a schema, its $refs followed once each. */
function defaultsUnder(schema: unknown, at: string, seen = new Set<string>()): string[] {
  if (schema === null || typeof schema !== 'object') return []
  const node = schema as Node
  const found: string[] = []
  if (typeof node.$ref === 'string' && !seen.has(node.$ref)) {
    seen.add(node.$ref)
    found.push(...defaultsUnder(resolve(node.$ref), node.$ref, seen))
  }
  for (const [key, value] of Object.entries(node)) {
    // `properties` maps names to schemas: a property may be called "default" without being one.
    if (key === 'default' && !at.endsWith('/properties')) found.push(`${at}/default`)
    else if (key !== 'examples' && key !== 'example') found.push(...defaultsUnder(value, `${at}/${key}`, seen))
  }
  return found
}

t.test('no request-body schema declares a default', async (t) => {
  const paths = spec.paths as Record<string, Record<string, Node>>
  let bodies = 0
  const found: string[] = []
  for (const [route, item] of Object.entries(paths))
    for (const [method, operation] of Object.entries(item)) {
      const body = operation.requestBody as Node | undefined
      if (!body) continue
      bodies++
      found.push(...defaultsUnder(body, `${method.toUpperCase()} ${route} requestBody`))
    }
  t.ok(bodies > 10, `${bodies} operations with a request body`)
  t.same([...new Set(found)], [], 'no default keyword in any of them')
})

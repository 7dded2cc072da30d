import fp from 'fastify-plugin'

// PostgreSQL stores neither U+0000 in text/jsonb nor arbitrarily deep documents survive
// recursive serializers, so both are refused at parse time as a malformed body (422).
const MAX_DEPTH = 64

/** Why a parsed JSON value cannot be accepted, or null. Iterative: no recursion on input. */
export function unacceptableJson(value: unknown): string | null {
  const stack: [unknown, number][] = [[value, 1]]
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!
    if (typeof node === 'string') {
      if (node.includes('\u0000')) return 'contains a NUL character'
      continue
    }
    if (node === null || typeof node !== 'object') continue
    if (depth > MAX_DEPTH) return `is nested deeper than ${MAX_DEPTH} levels`
    if (Array.isArray(node)) {
      for (const item of node) stack.push([item, depth + 1])
    } else {
      for (const [key, item] of Object.entries(node)) {
        if (key.includes('\u0000')) return 'contains a NUL character'
        stack.push([item, depth + 1])
      }
    }
  }
  return null
}

/** application/json with Fastify's prototype-poisoning protection plus the checks above. */
export default fp(
  async (fastify) => {
    const parseJson = fastify.getDefaultJsonParser('error', 'error')
    fastify.removeContentTypeParser('application/json')
    fastify.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
      parseJson(request, body as string, (err: Error | null, value?: unknown) => {
        if (err) return done(err, undefined)
        const problem = unacceptableJson(value)
        if (problem) {
          const refused = Object.assign(new Error(`JSON body ${problem}`), { statusCode: 400, code: 'FST_ERR_CTP_INVALID_JSON_BODY' })
          return done(refused, undefined)
        }
        done(null, value)
      })
    })
  },
  { name: 'json-body' },
)

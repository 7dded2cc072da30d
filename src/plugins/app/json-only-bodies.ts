import fp from 'fastify-plugin'

type BodySchema = { content?: Record<string, { schema?: unknown }> } | undefined

/**
 * The spec declares request bodies per media type; Fastify then skips validation when a request
 * has no Content-Type at all. The API takes JSON only (anything else is 415), so the JSON schema
 * becomes the route's body schema and a missing body is a 422 like any other.
 */
export default fp(
  async (fastify) => {
    fastify.addHook('onRoute', (route) => {
      const body = (route.schema as { body?: BodySchema } | undefined)?.body
      const json = body?.content?.['application/json']?.schema
      if (json) (route.schema as { body?: unknown }).body = json
    })
  },
  { name: 'json-only-bodies' },
)

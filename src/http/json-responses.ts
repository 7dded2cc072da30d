// An operation's response schemas as Fastify reads them fastest. fastify-openapi-glue hands a
// status over as `{ content: { 'application/json': { schema } } }`; for that form Fastify parses
// the reply's Content-Type on every answer to pick the serializer. Every JSON-only status is
// given as its schema alone, compiled once into the same serializer and found by status; a
// status with another media type keeps its map.
import type { RouteOptions } from 'fastify'

const JSON_MEDIA_TYPE = 'application/json'

interface ContentMap {
  content?: Record<string, { schema?: unknown }>
}

/** Rewrites the route's response schemas in place: each JSON-only status by its schema alone. */
export function withJsonResponsesByStatus(route: RouteOptions): void {
  const response = (route.schema as { response?: Record<string, ContentMap> } | undefined)?.response
  if (!response) return
  for (const [status, declared] of Object.entries(response)) {
    const mediaTypes = Object.keys(declared.content ?? {})
    const schema = declared.content?.[JSON_MEDIA_TYPE]?.schema
    if (mediaTypes.length === 1 && schema !== undefined) response[status] = schema as ContentMap
  }
}

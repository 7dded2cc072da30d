// An operation's schema as fastify-openapi-glue hands it over, reshaped once when its route is
// made (by the request pipeline's route options).
import type { RouteOptions } from 'fastify'
import { withJsonResponsesByStatus } from './json-responses.js'

type BodySchema = { content?: Record<string, { schema?: unknown }> } | undefined
type HeaderSchema = { properties?: Record<string, unknown>; required?: string[] } | undefined

/**
 * The spec declares request bodies per media type; Fastify then skips validation when a request
 * has no Content-Type at all. The API takes JSON only (anything else is 415), so the JSON schema
 * becomes the route's body schema and a missing body is a 422 like any other.
 */
function jsonOnlyBody(schema: { body?: unknown }): void {
  const json = (schema.body as BodySchema)?.content?.['application/json']?.schema
  if (json) schema.body = json
}

/** Takes a header out of the route's header schema: a pipeline stage checks it instead. */
function withoutHeader(schema: { headers?: unknown }, name: string): void {
  const headers = schema.headers as HeaderSchema
  if (!headers) return
  const other = (key: string) => key.toLowerCase() !== name
  if (headers.properties)
    headers.properties = Object.fromEntries(Object.entries(headers.properties).filter(([key]) => other(key)))
  if (headers.required) headers.required = headers.required.filter(other)
}

/**
 * A JSON-only body schema; without the headers a stage checks (`checkedHeaders`, lower case); each
 * JSON-only response by its schema alone (src/http/json-responses.ts).
 */
export function shapeOperationSchema(route: RouteOptions, checkedHeaders: readonly string[]): void {
  const schema = route.schema as { body?: unknown; headers?: unknown } | undefined
  if (!schema) return
  jsonOnlyBody(schema)
  for (const header of checkedHeaders) withoutHeader(schema, header)
  withJsonResponsesByStatus(route)
}

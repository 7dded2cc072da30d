// Response schemas by status: a JSON-only status is given to Fastify as its schema alone (no
// Content-Type parsed per answer to find its serializer); any other keeps its media-type map.
import t from 'tap'
import type { RouteOptions } from 'fastify'
import { withJsonResponsesByStatus } from '../../src/http/json-responses.js'

t.test('JSON-only statuses by their schema; other media types untouched', async (t) => {
  const user = { type: 'object', properties: { id: { type: 'string' } } }
  const envelope = { type: 'object', properties: { code: { type: 'string' } } }
  const route = {
    method: 'GET',
    url: '/x',
    handler: () => undefined,
    schema: {
      response: {
        200: { content: { 'application/json': { schema: user } } },
        '4XX': { content: { 'application/json': { schema: envelope } } },
        203: { content: { 'text/plain': { schema: { type: 'string' } } } },
        206: { content: { 'application/json': { schema: user }, 'text/csv': { schema: { type: 'string' } } } },
      },
    },
  } as unknown as RouteOptions
  withJsonResponsesByStatus(route)
  const response = (route.schema as { response: Record<string, unknown> }).response
  t.equal(response[200], user)
  t.equal(response['4XX'], envelope)
  t.same(response[203], { content: { 'text/plain': { schema: { type: 'string' } } } })
  t.same(Object.keys((response[206] as { content: object }).content), ['application/json', 'text/csv'])

  const bare = { method: 'GET', url: '/y', handler: () => undefined } as RouteOptions
  withJsonResponsesByStatus(bare)
  t.equal(bare.schema, undefined, 'a route without schemas is left alone')
})

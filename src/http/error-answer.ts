// Sending a catalogued error, and the answer for a request no route takes (404, or 405 with Allow).
// Routes outside the contract answer the methods they lack as contract paths do.
import type { FastifyReply, FastifyRequest, RouteOptions } from 'fastify'
import { type AppError, appError } from '../errors.js'
import { allowedMethods, declareServedPage } from './declared-methods.js'

/** Sends `err`'s envelope with its status and headers, and notes it for the request log and metrics. */
export function sendError(reply: FastifyReply, err: AppError) {
  reply.answeredError = { code: err.code, key: err.key }
  if (Object.keys(err.headers).length > 0) reply.headers(err.headers)
  return reply.code(err.statusCode).send(err.envelope())
}

/** No route for this method and path: 405 with Allow when the path exists (204 for OPTIONS), else 404. */
export function answerUnrouted(request: FastifyRequest, reply: FastifyReply) {
  const allow = allowedMethods(request.url.split('?')[0]!)
  if (allow === null) return sendError(reply, appError('ROUTE_NOT_FOUND'))
  if (request.method === 'OPTIONS') return reply.code(204).header('allow', allow).send()
  // A route of this method that sent the request on (a static file that is not there).
  if (allow.split(', ').includes(request.method)) return sendError(reply, appError('ROUTE_NOT_FOUND'))
  reply.header('allow', allow)
  return sendError(reply, appError('METHOD_NOT_ALLOWED'))
}

/**
 * Pages outside the contract answer unrouted methods as contract paths do: each GET route's path
 * is recorded for the Allow answer. HEAD is declared nowhere (the contract says so): a plugin's
 * own HEAD route (@fastify/static's) answers as unrouted too (405).
 */
export function answerAsDeclared(route: RouteOptions & { path?: string }): void {
  const methods = Array.isArray(route.method) ? route.method : [route.method]
  if (methods.includes('GET')) declareServedPage(route.url ?? route.path)
  if (!methods.includes('HEAD')) return
  if (methods.length === 1) route.handler = answerUnrouted
  else route.method = methods.filter((method) => method !== 'HEAD')
}

// The HTTP edge: Node's server with explicit timeouts, and the answers given before a request
// reaches a route (parser errors, timeouts, undecodable URLs), each with the error envelope.
import { createServer, type RequestListener, type Server } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify'
import type { Config } from '../config.js'
import { appError, type ErrorKey } from '../errors.js'
import { answerAndClose } from './raw-answer.js'

// How often Node looks for requests past their deadline: keeps a stalled request's 408 within
// about a second of REQUEST_TIMEOUT_MS (Node's default is every 30 s).
const DEADLINE_CHECK_INTERVAL_MS = 500
// A path parameter of any length reaches schema validation (422), never find-my-way's 414;
// Node's header limit bounds the URL anyway.
const MAX_PARAM_LENGTH = 65_536
// Idle keep-alive connections are closed after this (Node's default is 5 s).
const KEEP_ALIVE_TIMEOUT_MS = 10_000

const PARSER_ERRORS: Record<string, ErrorKey> = {
  ERR_HTTP_REQUEST_TIMEOUT: 'REQUEST_TIMEOUT',
  HPE_HEADER_OVERFLOW: 'REQUEST_HEADERS_TOO_LARGE',
}

// Sockets this server answered 408 and closed: a request still reading its body from one then
// fails as if its client had gone, and is logged as the timeout it is (error handler).
const timedOut = new WeakSet<Socket>()

/** The server closes this socket for a deadline of its own (REQUEST_TIMEOUT_MS, the minimum upload rate). */
export const markTimedOutByServer = (socket: Socket): void => {
  timedOut.add(socket)
}

/** True when the server itself closed this socket for its request deadline. */
export const timedOutByServer = (socket: Socket | null | undefined): boolean => socket != null && timedOut.has(socket)

type ClientErrorHandler = (
  this: Pick<FastifyInstance, 'serviceMetrics'> & { log: { info: (obj: object, msg: string) => void } },
  err: NodeJS.ErrnoException,
  socket: Socket,
) => void

/** Node's 'clientError': a timeout, an oversize header section or malformed HTTP. */
const clientErrorHandler: ClientErrorHandler = function (err, socket) {
  // A reset or a socket already gone is a client that left: nothing to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  const key = PARSER_ERRORS[err.code ?? ''] ?? 'MALFORMED_REQUEST'
  if (key === 'REQUEST_TIMEOUT') timedOut.add(socket)
  this.log.info({ code: err.code }, key === 'REQUEST_TIMEOUT' ? 'request timed out' : 'malformed request refused')
  if (answerAndClose(socket, key)) this.serviceMetrics.countEdgeAnswer(key)
}

/** Errors find-my-way raises while routing (undecodable URL): 400, the path never echoed. */
function frameworkErrors(_error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const err = appError('MALFORMED_REQUEST')
  request.log.info({ code: err.code, key: err.key }, 'malformed request refused')
  reply.answeredError = { code: err.code, key: err.key }
  reply.header('x-request-id', request.id).header('connection', 'close').code(err.statusCode).send(err.envelope())
}

export function serverOptions(config: Config): Partial<FastifyServerOptions> {
  const timeout = config.requestTimeoutMs
  return {
    serverFactory: (handler: RequestListener): Server => {
      const server = createServer(
        // Headers alone get the same deadline as the whole request.
        {
          requestTimeout: timeout,
          headersTimeout: timeout,
          keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
          connectionsCheckingInterval: DEADLINE_CHECK_INTERVAL_MS,
        },
        handler,
      )
      // A socket with no traffic at all for twice the request deadline is dropped.
      server.setTimeout(2 * timeout)
      return server
    },
    clientErrorHandler: clientErrorHandler,
    frameworkErrors: frameworkErrors,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
  } as Partial<FastifyServerOptions>
}

// Composition root: the HTTP edge, the cross-cutting plugins and the routes. The order of
// checks on a request is decided in one place: src/plugins/request-pipeline.ts.
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify'
import pinoPretty from 'pino-pretty'
import type { Config } from './config.js'
import type { Sql } from './db/client.js'
import { serverOptions } from './http/server-options.js'
import configPlugin from './plugins/config.js'
import requestIdPlugin, { requestIdFrom } from './plugins/request-id.js'
import errorHandlerPlugin, { safeErrorFields } from './plugins/error-handler.js'
import metricsPlugin from './plugins/metrics.js'
import databasePlugin from './plugins/database.js'
import idempotencyPurgePlugin from './plugins/idempotency-purge.js'
import authPlugin from './plugins/auth.js'
import rateLimitPlugin from './plugins/rate-limit.js'
import requestLogPlugin from './plugins/request-log.js'
import docsPlugin from './plugins/docs.js'
import jsonBodyPlugin from './plugins/json-body.js'
import jsonOnlyBodiesPlugin from './plugins/json-only-bodies.js'
import corsPlugin from './plugins/cors.js'
import loadSheddingPlugin from './plugins/load-shedding.js'
import bodyBudgetPlugin from './plugins/body-budget.js'
import earlyClosePlugin from './plugins/early-close.js'
import requestPipelinePlugin from './plugins/request-pipeline.js'
import routesPlugin from './plugins/routes.js'
import contractStatesPlugin from './plugins/contract-states.js'

export interface AppOptions {
  config: Config
  sql: Sql
  /** Fastify logger option; defaults to JSON logs at config.logLevel with secrets redacted. */
  logger?: FastifyServerOptions['logger'] | FastifyServerOptions['loggerInstance']
  /** Clock for schedule decisions; tests pass a controllable one. */
  now?: () => Date
}

export const REDACTED_HEADERS = ['x-api-key', 'authorization', 'cookie', 'set-cookie', 'proxy-authorization']

/**
 * JSON lines for machines; on a terminal (stdout a TTY, i.e. development), pino-pretty's
 * coloured lines instead. Synchronous, so the last line before exit is never lost.
 */
export function loggerOptions(config: Config, pretty = process.stdout.isTTY === true) {
  return {
    level: config.logLevel,
    ...(pretty ? { stream: pinoPretty({ sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' }) } : {}),
    redact: {
      paths: REDACTED_HEADERS.flatMap((h) => [`req.headers["${h}"]`, `headers["${h}"]`, `res.headers["${h}"]`]),
      censor: '[redacted]',
    },
    serializers: { err: safeErrorFields as never },
  }
}

export async function buildApp({ config, sql, logger, now }: AppOptions): Promise<FastifyInstance> {
  // A ready-made pino instance (tests capture lines) goes in as loggerInstance.
  const isInstance = typeof (logger as { info?: unknown } | undefined)?.info === 'function'
  const app: FastifyInstance = Fastify({
    ...(isInstance ? { loggerInstance: logger as never } : { logger: (logger === undefined ? loggerOptions(config) : logger) as boolean }),
    ...serverOptions(config),
    bodyLimit: config.bodyLimitBytes,
    genReqId: requestIdFrom,
    requestIdHeader: false,
    // request-log.ts writes one line per request instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: false,
    // On close, idle keep-alive connections are closed at once; busy ones finish their request.
    forceCloseConnections: 'idle',
    // The contract declares no HEAD operations: HEAD is an undeclared method (405 with Allow).
    exposeHeadRoutes: false,
  }) as unknown as FastifyInstance
  // JSON only: any other content type answers 415.
  app.removeContentTypeParser('text/plain')

  await app.register(configPlugin, { config })
  await app.register(jsonBodyPlugin)
  await app.register(jsonOnlyBodiesPlugin)
  await app.register(requestIdPlugin)
  await app.register(earlyClosePlugin)
  await app.register(requestLogPlugin)
  await app.register(errorHandlerPlugin)
  await app.register(metricsPlugin)
  await app.register(databasePlugin, { sql })
  await app.register(idempotencyPurgePlugin)
  await app.register(corsPlugin)
  await app.register(authPlugin)
  await app.register(rateLimitPlugin)
  await app.register(loadSheddingPlugin)
  await app.register(bodyBudgetPlugin)
  await app.register(requestPipelinePlugin)
  await app.register(docsPlugin)
  await app.register(routesPlugin, { now })
  await app.register(contractStatesPlugin)
  return app
}

// Composition root: how a request travels through the service, in the order it does. Each group
// below registers what that step needs; a plugin's `dependencies` (fastify-plugin) name what must
// be registered before it, and Fastify refuses to start when that order is broken. Which checks
// an operation gets, and in which order, is decided once per route by
// src/plugins/app/request-pipeline.ts (docs/architecture.md, "How a request travels").
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyServerOptions,
} from 'fastify'
import pinoPretty from 'pino-pretty'
import type { Config } from './config.js'
import type { Sql } from './db/client.js'
import { withDatabaseDeadlines } from './db/request-deadlines.js'
import { requestIdFrom } from './http/request-id.js'
import { serverOptions } from './http/server-options.js'
import { answerStore } from './idempotency/store.js'
import { createWrites } from './repositories/index.js'
import type { Tracing } from './tracing/index.js'
import analyticsPagePlugin from './plugins/app/analytics-page.js'
import analyticsRollupPlugin from './plugins/app/analytics-rollup.js'
import authPlugin from './plugins/app/auth.js'
import configPlugin from './plugins/app/config.js'
import contractStatesPlugin from './plugins/app/contract-states.js'
import databasePlugin from './plugins/app/database.js'
import earlyClosePlugin from './plugins/app/early-close.js'
import errorHandlerPlugin, { safeErrorFields } from './plugins/app/error-handler.js'
import idempotencyPurgePlugin from './plugins/app/idempotency-purge.js'
import jsonBodyPlugin from './plugins/app/json-body.js'
import requestIdPlugin from './plugins/app/request-id.js'
import requestLogPlugin from './plugins/app/request-log.js'
import requestPipelinePlugin from './plugins/app/request-pipeline.js'
import telemetryLifecyclePlugin from './plugins/app/telemetry-lifecycle.js'
import corsPlugin from './plugins/external/cors.js'
import docsPlugin from './plugins/external/docs.js'
import loadSheddingPlugin from './plugins/external/load-shedding.js'
import metricsPlugin from './plugins/external/metrics.js'
import rateLimitPlugin from './plugins/external/rate-limit.js'
import routesPlugin from './plugins/external/routes.js'
import { createServiceHandlers } from '../handlers/index.js'

export interface AppOptions {
  config: Config
  sql: Sql
  /** Fastify logger option; defaults to JSON logs at config.logLevel with secrets redacted. */
  logger?: FastifyServerOptions['logger'] | FastifyServerOptions['loggerInstance']
  /** Clock for schedule decisions; tests pass a controllable one. */
  now?: () => Date
  /** Milliseconds for the in-process rate-limit windows (default performance.now); tests pass a controllable one. */
  rateLimitClock?: () => number
  /** OpenTelemetry, when OTEL_* asks for it (src/tracing); absent, no tracing code runs. */
  tracing?: Tracing
  /**
   * LISTEN for changes of stored keys made by other replicas (default true). The embedded
   * database has one connection and one process: a change there is applied where it is made.
   */
  listenForKeyChanges?: boolean
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
    serializers: { err: safeErrorFields },
  }
}

export async function buildApp({
  config,
  sql,
  logger,
  now,
  rateLimitClock,
  tracing,
  listenForKeyChanges = true,
}: AppOptions): Promise<FastifyInstance> {
  // A ready-made pino instance (tests capture lines) goes in as loggerInstance.
  const isInstance = typeof (logger as { info?: unknown } | undefined)?.info === 'function'
  const app: FastifyInstance = Fastify({
    ...(isInstance
      ? { loggerInstance: logger as FastifyBaseLogger }
      : { logger: (logger === undefined ? loggerOptions(config) : logger) as boolean }),
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
  // JSON only: any other media type answers 415 (application/json is json-body's, below).
  app.removeContentTypeParser('text/plain')
  const clock = now ?? (() => new Date())

  // 1. What every later step reads. Their request hooks run first, in this order: the span, the
  //    timer, then who is calling.
  if (tracing) await tracing.register(app) // onRequest: the request's span, open before any other hook
  await app.register(configPlugin, { config }) // fastify.config
  // onRequest: the timer, ahead of any answer, so that an early one is timed too; onResponse: the counters
  await app.register(metricsPlugin) // GET /metrics
  await app.register(databasePlugin, { sql, exportMaxConnections: config.export.maxConnections }) // fastify.db
  await app.register(authPlugin, { listenWith: listenForKeyChanges ? sql : undefined }) // onRequest: request.apiKey

  // 2. Every request, routed or not, in this order.
  await app.register(requestIdPlugin) // onRequest: X-Request-Id on every answer
  await app.register(errorHandlerPlugin) // onRequest: 404, or 405 with Allow, unread; then every error's envelope
  await app.register(corsPlugin) // onRequest: CORS (preflight included) for the telemetry ingest routes
  await app.register(loadSheddingPlugin) // measures load (fastify.loadShedding); the pipeline sheds
  await app.register(earlyClosePlugin) // onSend: an answer given before the body was read closes the connection
  await app.register(requestLogPlugin) // onResponse: one line per request
  await app.register(jsonBodyPlugin) // the body parser: application/json, strict UTF-8, capped values

  // 3. The checks of each operation (the order of checks), attached once, when its route is made.
  await app.register(rateLimitPlugin, { windowClock: rateLimitClock, tracing }) // stage 1's hook
  await app.register(requestPipelinePlugin) // the one onRoute hook: every route's options

  // 4. Work beside the requests.
  await app.register(idempotencyPurgePlugin)
  await app.register(telemetryLifecyclePlugin, { now: clock })
  await app.register(analyticsRollupPlugin, { intervalMs: config.analyticsRefreshIntervalMs })

  // 5. The routes: pages outside the contract, then the contract's operations (the handlers,
  //    built here: no plugin imports them).
  await app.register(docsPlugin) // /openapi.json, /docs, /arazzo.yaml
  await app.register(analyticsPagePlugin) // /analytics
  app.decorate('draining', false)
  // Every handler's database work within the request's deadline (src/db/deadline.ts).
  const serviceHandlers = withDatabaseDeadlines(
    config.databaseDeadlines,
    createServiceHandlers({
      config,
      db: app.db,
      apiKeys: app.apiKeys,
      writes: createWrites(answerStore(app.db, config.idempotencyTtlHours)),
      isDraining: () => app.draining,
      isUnderPressure: app.loadShedding.overloaded,
      refreshAnalytics: () =>
        void app.analyticsRollup.refresh().catch((err) => app.log.warn({ err }, 'analytics rollup refresh failed')),
      now: clock,
    }),
  )
  await app.register(routesPlugin, { serviceHandlers }) // fastify-openapi-glue: one route per operation
  await app.register(contractStatesPlugin) // POST /_contract/provider-states, for contract tests only
  return app
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Set when shutdown begins (src/server.ts); /ready answers not_ready from then on. */
    draining: boolean
  }
}

// Composition root: the HTTP edge, the cross-cutting plugins and the routes. The order of
// checks on a request is decided in one place: src/plugins/app/request-pipeline.ts.
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyServerOptions,
} from 'fastify'
import pinoPretty from 'pino-pretty'
import type { Config } from './config.js'
import type { Sql } from './db/client.js'
import { serverOptions } from './http/server-options.js'
import configPlugin from './plugins/app/config.js'
import requestIdPlugin, { requestIdFrom } from './plugins/app/request-id.js'
import errorHandlerPlugin, { safeErrorFields } from './plugins/app/error-handler.js'
import metricsPlugin from './plugins/external/metrics.js'
import databasePlugin from './plugins/app/database.js'
import idempotencyPurgePlugin from './plugins/app/idempotency-purge.js'
import telemetryLifecyclePlugin from './plugins/app/telemetry-lifecycle.js'
import analyticsRollupPlugin from './plugins/app/analytics-rollup.js'
import authPlugin from './plugins/app/auth.js'
import rateLimitPlugin from './plugins/external/rate-limit.js'
import requestLogPlugin from './plugins/app/request-log.js'
import analyticsPagePlugin from './plugins/external/analytics-page.js'
import docsPlugin from './plugins/external/docs.js'
import jsonBodyPlugin from './plugins/app/json-body.js'
import jsonOnlyBodiesPlugin from './plugins/app/json-only-bodies.js'
import corsPlugin from './plugins/external/cors.js'
import loadSheddingPlugin from './plugins/external/load-shedding.js'
import bodyBudgetPlugin from './plugins/app/body-budget.js'
import earlyClosePlugin from './plugins/app/early-close.js'
import requestPipelinePlugin from './plugins/app/request-pipeline.js'
import routesPlugin from './plugins/external/routes.js'
import contractStatesPlugin from './plugins/app/contract-states.js'
import { answerStore } from './idempotency/store.js'
import { createWrites } from './repositories/index.js'
import { createServiceHandlers } from '../handlers/index.js'
import { withDatabaseDeadlines } from './db/request-deadlines.js'
import type { Tracing } from './tracing/index.js'

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
  // JSON only: any other content type answers 415.
  app.removeContentTypeParser('text/plain')

  // First, so that its request span is open before any other hook runs.
  if (tracing) await tracing.register(app)
  app.decorate('tracing', tracing ?? null)
  await app.register(configPlugin, { config })
  // Before any other onRequest hook: a request answered there (an unrouted one, a refused key)
  // is timed too.
  await app.register(metricsPlugin)
  await app.register(jsonBodyPlugin)
  await app.register(jsonOnlyBodiesPlugin)
  await app.register(requestIdPlugin)
  await app.register(earlyClosePlugin)
  await app.register(requestLogPlugin)
  await app.register(errorHandlerPlugin)
  await app.register(databasePlugin, { sql, exportMaxConnections: config.export.maxConnections })
  await app.register(idempotencyPurgePlugin)
  await app.register(telemetryLifecyclePlugin, { now: now ?? (() => new Date()) })
  await app.register(analyticsRollupPlugin, { intervalMs: config.analyticsRefreshIntervalMs })
  await app.register(corsPlugin)
  await app.register(authPlugin, { listenWith: listenForKeyChanges ? sql : undefined })
  await app.register(rateLimitPlugin, { windowClock: rateLimitClock })
  await app.register(loadSheddingPlugin)
  await app.register(bodyBudgetPlugin)
  await app.register(requestPipelinePlugin)
  await app.register(docsPlugin)
  await app.register(analyticsPagePlugin)
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
      isUnderPressure: () => app.overloaded(),
      refreshAnalytics: () =>
        void app.analyticsRollup.refresh().catch((err) => app.log.warn({ err }, 'analytics rollup refresh failed')),
      now: now ?? (() => new Date()),
    }),
  )
  await app.register(routesPlugin, { serviceHandlers })
  await app.register(contractStatesPlugin)
  return app
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Null when tracing is off. */
    tracing: Tracing | null
  }
}

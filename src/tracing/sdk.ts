// The OpenTelemetry SDK, loaded only when tracing is on (see index.ts). NodeSDK reads the
// standard variables: exporter endpoint and protocol, sampler (e.g. parentbased_traceidratio),
// batch span processor timing, propagators (W3C traceparent by default), resource attributes.
import { trace } from '@opentelemetry/api'
import { NodeSDK } from '@opentelemetry/sdk-node'
import type { FastifyInstance } from 'fastify'
import { traceRateLimitStore, type DecisionStore } from './rate-limit.js'
import { registerServerSpans } from './server-span.js'
import { traceStatements } from './sql.js'

export interface Tracing {
  /** Called first on the app: a server span per sampled request, trace ids on its log lines. */
  register(app: FastifyInstance): Promise<void>
  /** The rate-limit store whose decisions become child spans. */
  traceRateLimitStore<T extends DecisionStore>(store: T): T
  /** Exports the spans still buffered; called on shutdown. */
  shutdown(): Promise<void>
}

export function startSdk(env: NodeJS.ProcessEnv): Tracing {
  const sdk = new NodeSDK({
    ...(env.OTEL_SERVICE_NAME ? {} : { serviceName: 'study-service' }),
    // Traces only: metrics are Prometheus' (/metrics) and logs are pino's. Without these, an
    // OTLP endpoint would also get a metrics export every minute and a logger provider.
    metricReaders: [],
    logRecordProcessors: [],
  })
  sdk.start()
  const tracer = trace.getTracer('study-service')
  // Every statement made in a sampled request becomes a child span of the request's span.
  const stopTracingStatements = traceStatements(tracer)
  return {
    register: async (app) => registerServerSpans(app, tracer),
    traceRateLimitStore: (store) => traceRateLimitStore(store, tracer),
    shutdown: () => {
      stopTracingStatements()
      return sdk.shutdown()
    },
  }
}

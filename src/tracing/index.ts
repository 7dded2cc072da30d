// Tracing is on only when an OTLP exporter is configured through the standard OTEL_* variables.
// Off, nothing of OpenTelemetry is even imported: no hook, wrapper or branch runs per request.
import type { Tracing } from './sdk.js'

export type { Tracing } from './sdk.js'

/**
 * True when the environment asks for traces: an OTLP endpoint (general or for traces) or a
 * traces exporter other than `none`, and the SDK not disabled (OTEL_SDK_DISABLED=true).
 */
export function tracingRequested(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase()
  if (exporter === 'none') return false
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || exporter)
}

/** Starts the OpenTelemetry SDK when requested; undefined (and nothing loaded) otherwise. */
export async function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<Tracing | undefined> {
  if (!tracingRequested(env)) return undefined
  const { startSdk } = await import('./sdk.js')
  return startSdk(env)
}

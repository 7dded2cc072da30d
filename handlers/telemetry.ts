// ingestDocsSearchEvent, ingestDocsSearchEventBatch, getDocsSearchTelemetryMetrics.
import type { HandlerDeps, ServiceHandlers } from './types.js'

type TelemetryOperations = 'ingestDocsSearchEvent' | 'ingestDocsSearchEventBatch' | 'getDocsSearchTelemetryMetrics'

export function createTelemetryHandlers({ db, now }: HandlerDeps): ServiceHandlers<TelemetryOperations> {
  return {
    async ingestDocsSearchEvent(request, reply) {
      const accepted = await db.repos.telemetry.append([request.body])
      return reply.code(202).send({ accepted })
    },

    async ingestDocsSearchEventBatch(request, reply) {
      // The whole batch passed validation before this point; one INSERT stores it.
      const accepted = await db.repos.telemetry.append(request.body.events)
      return reply.code(202).send({ accepted })
    },

    async getDocsSearchTelemetryMetrics(request) {
      const windowMinutes = request.query.window_minutes ?? 60
      const toMs = now().getTime()
      const kpis = await db.repos.telemetry.metrics(toMs - windowMinutes * 60_000, toMs)
      return { window_minutes: windowMinutes, ...kpis }
    },
  }
}

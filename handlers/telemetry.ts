// ingestDocsSearchEvent, ingestDocsSearchEventBatch, getDocsSearchTelemetryMetrics, eraseDocsSearchSession.
import { sendAnswer } from '../src/http/send-answer.js'
import { idempotentRequest } from '../src/idempotency/request.js'
import type { HandlerDeps, ServiceHandlers, SuccessBody } from './types.js'

type TelemetryOperations =
  | 'ingestDocsSearchEvent'
  | 'ingestDocsSearchEventBatch'
  | 'getDocsSearchTelemetryMetrics'
  | 'eraseDocsSearchSession'

export function createTelemetryHandlers({
  db,
  writes,
  now,
  refreshAnalytics,
}: HandlerDeps): ServiceHandlers<TelemetryOperations> {
  return {
    async ingestDocsSearchEvent(request, reply) {
      const accepted = await db.repos.telemetry.append([request.body])
      return reply.code(202).send({ accepted })
    },

    async ingestDocsSearchEventBatch(request, reply) {
      // The whole batch passed validation before this point; one INSERT stores it. With an
      // Idempotency-Key (optional here) the INSERT and the stored answer are one transaction
      // (src/repositories/telemetry.ts), so a retried batch is stored once and answered with the first 202.
      const events = request.body.events
      if (request.headers['idempotency-key'] !== undefined)
        return sendAnswer(reply, await writes.telemetry.appendOnce(idempotentRequest(request, reply), events))
      const accepted = await db.repos.telemetry.append(events)
      return reply.code(202).send({ accepted })
    },

    async getDocsSearchTelemetryMetrics(request) {
      const windowMinutes = request.query.window_minutes ?? 60
      const toMs = now().getTime()
      const kpis = await db.repos.telemetry.metrics(toMs - windowMinutes * 60_000, toMs)
      return { window_minutes: windowMinutes, ...kpis }
    },

    async eraseDocsSearchSession(request): Promise<SuccessBody<'eraseDocsSearchSession', 200>> {
      const sessionId = request.params.session_id
      const erased = await eraseRetrying(() => db.transaction((tx) => tx.repos.telemetry.eraseSession(sessionId)))
      // The record of who erased (the key id) and how much; the session id itself is not logged.
      request.log.info({ key_id: request.apiKeyId, erased_events: erased }, 'docs-search session erased')
      // The analytics rollup copies what the session asked (texts, its id): recomputed at once.
      if (erased > 0) refreshAnalytics()
      return { session_id: sessionId, erased_events: erased }
    },
  }
}

/**
 * Runs an erasure again (a whole new transaction; the failed one rolled back) when retention
 * dropped an archived day between its listing and its DELETE (42P01, undefined table).
 */
async function eraseRetrying(erase: () => Promise<number>): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await erase()
    } catch (err) {
      if ((err as { code?: string }).code !== '42P01' || attempt >= 3) throw err
    }
  }
}

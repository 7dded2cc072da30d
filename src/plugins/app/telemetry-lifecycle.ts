import fp from 'fastify-plugin'
import { TelemetryLifecycle } from '../../telemetry/lifecycle.js'

declare module 'fastify' {
  interface FastifyInstance {
    telemetryLifecycle: TelemetryLifecycle
  }
}

/**
 * Runs the docs-search events' lifecycle (src/telemetry/lifecycle.ts) once at start, so that the
 * partitions ahead exist before the first request, then every `intervalMs`; exposes its figures
 * in /metrics. A failed run is logged and tried again at the next tick.
 */
export default fp<{ now: () => Date; intervalMs?: number }>(
  async (fastify, { now, intervalMs = 60 * 60_000 }) => {
    const lifecycle = new TelemetryLifecycle(fastify.db, {
      retentionDays: fastify.config.telemetryRetentionDays,
      now,
      log: fastify.log,
    })
    fastify.decorate('telemetryLifecycle', lifecycle)
    const run = async () => {
      try {
        await lifecycle.run()
      } catch (err) {
        fastify.log.warn({ err }, 'telemetry lifecycle run failed')
      }
    }
    await run()
    const timer = setInterval(run, intervalMs)
    timer.unref()
    fastify.addHook('onClose', async () => {
      clearInterval(timer)
      await lifecycle.settled()
    })

    const client = fastify.metrics.client
    const figures = lifecycle.figures
    const gauge = (name: string, help: string, read: () => number | null) =>
      new client.Gauge({
        name,
        help,
        collect() {
          this.set(read() ?? 0)
        },
      })
    gauge(
      'docs_search_retention_rows_dropped',
      'Docs-search events removed by retention by this process (dropped partitions and old DEFAULT rows)',
      () => figures.rowsDropped,
    )
    gauge(
      'docs_search_retention_partitions_dropped',
      'Docs-search event partitions dropped by retention by this process',
      () => figures.partitionsDropped,
    )
    gauge(
      'docs_search_retention_partitions_archived',
      'Docs-search event partitions past the KPI horizon archived (KPI indexes dropped) by this process',
      () => figures.partitionsArchived,
    )
    gauge(
      'docs_search_retention_rollup_rows_dropped',
      'Query rollup rows and KPI buckets no window can reach, deleted by this process',
      () => figures.rollupRowsDropped,
    )
    gauge(
      'docs_search_retention_last_run_timestamp_seconds',
      'When this process last completed a retention run (0: never)',
      () => (figures.lastRunMs === null ? null : figures.lastRunMs / 1000),
    )
    gauge(
      'docs_search_oldest_event_kept_timestamp_seconds',
      'emitted_at of the oldest docs-search event kept (of an archived day: its start), as of the last run (0: none)',
      () => (figures.oldestEventMs === null ? null : figures.oldestEventMs / 1000),
    )
  },
  { name: 'telemetry-lifecycle', dependencies: ['database', 'metrics', 'config'] },
)

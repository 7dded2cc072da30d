import fp from 'fastify-plugin'
import { AnalyticsRollup } from '../../telemetry/analytics-rollup.js'

declare module 'fastify' {
  interface FastifyInstance {
    analyticsRollup: AnalyticsRollup
  }
}

/**
 * Refreshes the docs-search analytics rollup (src/telemetry/analytics-rollup.ts) at start, in the
 * background, then every `intervalMs`: the analytics answer with data at most about that old. A
 * refresh stops taking more slices after a quarter of the interval (after an upgrade, every stored
 * slice is logged; during a burst of ingest, slices are logged faster than they can be
 * recomputed): ingest keeps the rest of the CPU, and the slices left wait for the next refresh,
 * the newest first. Exposes its figures in /metrics. A failed refresh is logged and its slices
 * stay logged for the next one.
 */
export default fp<{ intervalMs?: number }>(
  async (fastify, { intervalMs = 60_000 }) => {
    const rollup = new AnalyticsRollup(fastify.db, intervalMs / 4)
    fastify.decorate('analyticsRollup', rollup)
    const refresh = () =>
      void rollup.refresh().catch((err) => fastify.log.warn({ err }, 'analytics rollup refresh failed'))
    refresh()
    const timer = setInterval(refresh, intervalMs)
    timer.unref()
    fastify.addHook('onClose', async () => {
      clearInterval(timer)
      await rollup.settled()
    })

    const figures = rollup.figures
    new fastify.metrics.client.Gauge({
      name: 'docs_search_analytics_refreshed_timestamp_seconds',
      help: 'When the last refresh of the docs-search analytics rollup by this process that left no slice logged started: its answers hold the events stored before (0: never)',
      collect() {
        this.set(figures.lastRefreshStartMs === null ? 0 : figures.lastRefreshStartMs / 1000)
      },
    })
    new fastify.metrics.client.Gauge({
      name: 'docs_search_analytics_refresh_backlog_slices',
      help: 'The 5-minute slices the last refresh of the docs-search analytics rollup by this process left logged for the next ones, its budget spent (0: it left none)',
      collect() {
        this.set(figures.backlogSlices)
      },
    })
    new fastify.metrics.client.Gauge({
      name: 'docs_search_analytics_refresh_duration_seconds',
      help: 'How long the last refresh of the docs-search analytics rollup by this process took (0: never)',
      collect() {
        this.set(figures.lastRefreshMs === null ? 0 : figures.lastRefreshMs / 1000)
      },
    })
  },
  { name: 'analytics-rollup', dependencies: ['database', 'metrics'] },
)

import fp from 'fastify-plugin'
import underPressure from '@fastify/under-pressure'

declare module 'fastify' {
  interface FastifyInstance {
    /** True while the process is past a load-shedding threshold. */
    overloaded(): boolean
  }
}

// Often enough that shedding starts and stops within a fraction of a second.
const SAMPLE_INTERVAL_MS = 100
// The first samples after start-up measure the start-up itself (module loading, schema
// compilation), not load: they are not taken as overload.
const SETTLE_SAMPLES = 3

/**
 * Measures whether the process is overloaded (event-loop delay or utilisation, heap, RSS past
 * the configured thresholds; @fastify/under-pressure) and exposes `fastify.overloaded()`. It
 * answers nothing itself: the request pipeline decides which operations shed load (business
 * routes answer 503), /ready reports it, and /live keeps answering.
 */
export default fp(
  async (fastify) => {
    const limits = fastify.config.loadShed
    await fastify.register(underPressure, {
      maxEventLoopDelay: limits.maxEventLoopDelayMs,
      maxEventLoopUtilization: limits.maxEventLoopUtilization,
      maxHeapUsedBytes: limits.maxHeapUsedBytes,
      maxRssBytes: limits.maxRssBytes,
      sampleInterval: SAMPLE_INTERVAL_MS,
      // Its own hook lets every request through; the pipeline's stage sheds.
      pressureHandler: () => undefined,
    })
    let settledAt = Number.POSITIVE_INFINITY
    fastify.addHook('onReady', async () => {
      settledAt = performance.now() + SETTLE_SAMPLES * SAMPLE_INTERVAL_MS
    })
    fastify.decorate('overloaded', () => performance.now() >= settledAt && fastify.isUnderPressure())
  },
  { name: 'load-shedding', dependencies: ['config'] },
)

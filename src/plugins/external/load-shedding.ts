import fp from 'fastify-plugin'
import underPressure from '@fastify/under-pressure'
import { sampleStrain } from '../../http/load-level.js'

declare module 'fastify' {
  interface FastifyInstance {
    loadShedding: {
      /** True while the process is past a load-shedding threshold. */
      overloaded(): boolean
      /** True while the process is past LOAD_SHED_BEST_EFFORT_FRACTION of a threshold: best-effort traffic sheds. */
      strained(): boolean
    }
  }
}

// under-pressure's default. A window in which Node's delay histogram recorded no sample reads as
// an infinite delay: with 100 ms windows, a saturating batch load left such windows and was shed
// while the loop stayed well under its threshold.
const SAMPLE_INTERVAL_MS = 1000
// The first sample after start-up measures the start-up itself (module loading, schema
// compilation), not load: it is not taken as overload.
const SETTLE_SAMPLES = 2

/**
 * Measures whether the process is overloaded (event-loop delay or utilisation, heap, RSS past
 * the configured thresholds; @fastify/under-pressure) and exposes `fastify.loadShedding`:
 * `overloaded()`, and `strained()` for a fraction of the same thresholds (best-effort traffic
 * sheds first; src/http/load-level.ts). It answers nothing itself: the request pipeline decides
 * which operations shed load (business routes answer 503), /ready reports it, and /live keeps
 * answering.
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
    const strain = sampleStrain(limits, () => fastify.memoryUsage(), SAMPLE_INTERVAL_MS)
    fastify.addHook('onClose', (_instance, done) => {
      strain.stop()
      done()
    })
    fastify.decorate('loadShedding', {
      overloaded: () => performance.now() >= settledAt && fastify.isUnderPressure(),
      strained: () => performance.now() >= settledAt && (strain.strained || fastify.isUnderPressure()),
    })
  },
  { name: 'load-shedding', dependencies: ['config'] },
)

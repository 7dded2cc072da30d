// How loaded the process is, beside @fastify/under-pressure's yes/no: the largest of its
// measures over their thresholds, sampled once per interval (a request reads a boolean).
import type { Config } from '../config.js'

/** @fastify/under-pressure's memoryUsage(). */
export interface PressureMeasures {
  eventLoopDelay: number
  eventLoopUtilized: number
  heapUsed: number
  rssBytes: number
}

/**
 * Samples the measures every `intervalMs`; `strained` (a plain field) says whether the process was
 * past `limits.bestEffortFraction` of a threshold at the last sample.
 */
export function sampleStrain(
  limits: Config['loadShed'],
  measure: () => PressureMeasures,
  intervalMs: number,
): { readonly strained: boolean; stop(): void } {
  const level = { strained: false, stop: () => clearInterval(sampler) }
  const sample = () => {
    const used = measure()
    const ratio = Math.max(
      limits.maxEventLoopDelayMs > 0 ? used.eventLoopDelay / limits.maxEventLoopDelayMs : 0,
      limits.maxEventLoopUtilization > 0 ? used.eventLoopUtilized / limits.maxEventLoopUtilization : 0,
      limits.maxHeapUsedBytes > 0 ? used.heapUsed / limits.maxHeapUsedBytes : 0,
      limits.maxRssBytes > 0 ? used.rssBytes / limits.maxRssBytes : 0,
    )
    level.strained = ratio >= limits.bestEffortFraction
  }
  const sampler = setInterval(sample, intervalMs).unref()
  return level
}

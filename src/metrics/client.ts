// The Prometheus client fastify-metrics registers with (its registry serves /metrics).
import type { IFastifyMetrics } from 'fastify-metrics'

export type MetricsClient = IFastifyMetrics['client']

/** A labelled series is looked up by hashing its labels on every call: each is made once per key and kept. */
export function keptSeries<Args extends unknown[], Series>(make: (...args: Args) => Series) {
  const kept = new Map<string, Series>()
  return (key: string, ...args: Args): Series => {
    let series = kept.get(key)
    if (series === undefined) {
      series = make(...args)
      kept.set(key, series)
    }
    return series
  }
}

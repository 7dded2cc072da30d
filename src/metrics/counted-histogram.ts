// A histogram whose series are plain counters, handed to prom-client's registry as one metric
// that it renders at scrape time. prom-client's own labelled observe validates and hashes the
// labels on every call (about 1 µs); here the labels are fixed when a series is made, so an
// observation is a bucket search and three additions. The exposition (text and JSON) is the
// one prom-client gives a Histogram with the same name, labels and buckets, without exemplars
// (test/operations/counted-histogram.test.ts compares the two).
import type { FastifyInstance } from 'fastify'

/** prom-client's registry, as fastify-metrics hands it over (fastify.metrics.client.register). */
type Registry = FastifyInstance['metrics']['client']['register']
type Metric = Parameters<Registry['registerMetric']>[0]

/** prom-client's default buckets (seconds). */
export const DEFAULT_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** One label set's counts. */
export class CountedSeries {
  /** Observations in each bucket alone (not cumulative); above the last bound: in none. */
  readonly inBucket: Float64Array
  sum = 0
  count = 0

  constructor(
    readonly labels: Readonly<Record<string, string>>,
    private readonly bounds: readonly number[],
  ) {
    this.inBucket = new Float64Array(bounds.length)
  }

  observe(value: number): void {
    const bounds = this.bounds
    let i = 0
    while (i < bounds.length && value > bounds[i]!) i++
    if (i < bounds.length) this.inBucket[i]!++
    this.sum += value
    this.count++
  }
}

interface ExportedValue {
  labels: Record<string, string | number>
  sharedLabels: Readonly<Record<string, string>>
  value: number
  metricName: string
  exemplar: null | undefined
}

export class CountedHistogram {
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  private readonly all: CountedSeries[] = []

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly bounds: readonly number[] = DEFAULT_BUCKETS,
    register: Registry,
  ) {
    register.registerMetric(this as unknown as Metric)
  }

  /** A new series (the caller keeps it; one per label set). */
  series(labels: Readonly<Record<string, string>>): CountedSeries {
    const series = new CountedSeries(labels, this.bounds)
    this.all.push(series)
    return series
  }

  /** The registry's text exposition reads this: the shape of prom-client's Histogram. */
  async getForPromString() {
    const values: ExportedValue[] = []
    const bucket = `${this.name}_bucket`
    for (const series of this.all) {
      // As prom-client: a label set appears with its first observation (and again after a reset).
      if (series.count === 0) continue
      let cumulative = 0
      for (let i = 0; i < this.bounds.length; i++) {
        cumulative += series.inBucket[i]!
        values.push({
          labels: { le: this.bounds[i]! },
          sharedLabels: series.labels,
          value: cumulative,
          metricName: bucket,
          exemplar: null,
        })
      }
      values.push(
        {
          labels: { le: '+Inf' },
          sharedLabels: series.labels,
          value: series.count,
          metricName: bucket,
          exemplar: null,
        },
        {
          labels: {},
          sharedLabels: series.labels,
          value: series.sum,
          metricName: `${this.name}_sum`,
          exemplar: undefined,
        },
        {
          labels: {},
          sharedLabels: series.labels,
          value: series.count,
          metricName: `${this.name}_count`,
          exemplar: undefined,
        },
      )
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }

  /** The JSON form: each value's labels with its series' labels merged in. */
  async get() {
    const data = await this.getForPromString()
    return {
      ...data,
      values: data.values.map(({ labels, sharedLabels, ...value }) => ({
        ...value,
        labels: { ...labels, ...sharedLabels },
      })),
    }
  }

  reset(): void {
    for (const series of this.all) {
      series.inBucket.fill(0)
      series.sum = 0
      series.count = 0
    }
  }
}

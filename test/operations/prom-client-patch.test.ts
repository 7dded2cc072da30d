// patches/prom-client+15.1.3.patch: a series taken once with labels() (src/plugins/metrics.ts
// keeps one per method, route and status) is validated and hashed when it is made, not on every
// observe() or inc() (prometheus/client_js#38). Unpatched, each call re-reads and re-joins the
// labels: the per-request cost of the two request metrics. The patched observe() also finds its
// bucket by index and counts it under a property name made once. The values must not change.
import t from 'tap'
import { Counter, Histogram, Registry } from 'prom-client'

/** A labels object that counts how often its values are read. */
function countedLabels(values: Record<string, string>) {
  const reads = { count: 0 }
  const labels = {}
  for (const [name, value] of Object.entries(values)) {
    Object.defineProperty(labels, name, {
      enumerable: true,
      get() {
        reads.count++
        return value
      },
    })
  }
  return { labels: labels as Record<string, string>, reads }
}

type Sample = { metricName: string; labels: Record<string, unknown>; value: number }
const samplesOf = async (registry: Registry) => ((await registry.getMetricsAsJSON())[0] as unknown as { values: Sample[] }).values

const values = { method: 'GET', path_template: '/api/v1/user/{system_uuid}/{system_user_id}', status: '200' }
const labelNames = Object.keys(values)

t.test('a histogram series observes without re-reading its labels, and its values are exact', async (t) => {
  const registry = new Registry()
  const histogram = new Histogram({ name: 'h_seconds', help: 'h', labelNames, buckets: [0.01, 0.1, 1], registers: [registry] })
  const { labels, reads } = countedLabels(values)
  const series = histogram.labels(labels)
  const readsWhenMade = reads.count
  for (let i = 0; i < 1000; i++) series.observe(i % 2 === 0 ? 0.0078125 : 0.5)
  t.equal(reads.count, readsWhenMade, `labels read ${reads.count - readsWhenMade} times by 1000 observations (unpatched: thousands)`)

  const samples = await samplesOf(registry)
  const sample = (name: string, le?: number) => samples.find((v) => v.metricName === name && (le === undefined || v.labels.le === le))!.value
  t.equal(sample('h_seconds_count'), 1000)
  t.equal(sample('h_seconds_sum'), 500 * 0.0078125 + 500 * 0.5, 'sums of values exact in binary')
  t.equal(sample('h_seconds_bucket', 0.01), 500)
  t.equal(sample('h_seconds_bucket', 0.1), 500)
  t.equal(sample('h_seconds_bucket', 1), 1000)
  t.throws(() => series.observe(Number.NaN), TypeError, 'a non-finite value is still refused')

  histogram.reset()
  series.observe(0.05)
  t.equal((await samplesOf(registry)).find((v) => v.metricName === 'h_seconds_count')!.value, 1, 'a kept series counts again after reset()')
  t.throws(() => histogram.labels({ method: 'GET', nope: 'x' } as never), 'unknown label names are refused when the series is made')
})

t.test('a histogram series counts each value in the first bucket whose bound it does not exceed', async (t) => {
  const registry = new Registry()
  const histogram = new Histogram({ name: 'e_seconds', help: 'e', labelNames: ['method'], buckets: [0.005, 0.1, 2.5], registers: [registry] })
  const series = histogram.labels({ method: 'GET' })
  // On a bound, just above it, below every bound (zero and negative), and above every bound.
  for (const value of [0.005, 0.0050001, 0.1, 2.5, 0, -1, 2.5000001, 1e9]) series.observe(value)
  const samples = await samplesOf(registry)
  const bucket = (le: number | string) => samples.find((v) => v.metricName === 'e_seconds_bucket' && v.labels.le === le)!.value
  t.same([bucket(0.005), bucket(0.1), bucket(2.5), bucket('+Inf')], [3, 5, 6, 8], 'cumulative counts per bound')
  t.equal(samples.find((v) => v.metricName === 'e_seconds_count')!.value, 8)
})

t.test('a counter series increments without re-reading its labels, and its value is exact', async (t) => {
  const registry = new Registry()
  const counter = new Counter({ name: 'c_total', help: 'c', labelNames, registers: [registry] })
  const { labels, reads } = countedLabels(values)
  const series = counter.labels(labels)
  const readsWhenMade = reads.count
  for (let i = 0; i < 1000; i++) series.inc()
  series.inc(5)
  t.equal(reads.count, readsWhenMade, `labels read ${reads.count - readsWhenMade} times by 1001 increments (unpatched: thousands)`)
  t.equal((await counter.get()).values[0]!.value, 1005)
  t.same((await counter.get()).values[0]!.labels, values)
  t.throws(() => series.inc(-1), 'a counter still cannot decrease')
  t.throws(() => series.inc(Number.POSITIVE_INFINITY), TypeError, 'a non-finite increment is still refused')
  t.equal((await counter.get()).values[0]!.value, 1005, 'refused increments change nothing')
  counter.remove(values)
  series.inc()
  t.equal((await counter.get()).values[0]!.value, 1, 'a kept series starts again after remove()')
})

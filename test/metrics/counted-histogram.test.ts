// The counted histogram renders exactly what prom-client's Histogram renders for the same
// observations: the text exposition, the JSON form and after a reset.
import t from 'tap'
import Fastify from 'fastify'
import fastifyMetrics from 'fastify-metrics'
import { CountedHistogram } from '../../src/metrics/counted-histogram.js'

t.test('the same text and JSON as prom-client for the same observations', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyMetrics.default ?? fastifyMetrics, {
    endpoint: null,
    defaultMetrics: { enabled: false },
    routeMetrics: { enabled: false },
  })
  const client = app.metrics.client
  const theirs = new client.Registry()
  const ours = new client.Registry()
  const buckets = [0.001, 0.01, 0.1, 1]
  const name = 'answer_seconds'
  const help = 'Time to answer'
  const reference = new client.Histogram({
    name,
    help,
    labelNames: ['method', 'status'],
    buckets,
    registers: [theirs],
  })
  const counted = new CountedHistogram(name, help, buckets, ours)

  const get200 = counted.series({ method: 'GET', status: '200' })
  const post201 = counted.series({ method: 'POST', status: '201' })
  t.equal(await ours.metrics(), await theirs.metrics(), 'no observation yet: the same HELP and TYPE')
  // On a bound, between bounds, above the last, zero, and sums that are not exact in binary.
  const observations: [typeof get200, Record<string, string>, number][] = [
    [get200, { method: 'GET', status: '200' }, 0.001],
    [get200, { method: 'GET', status: '200' }, 0.0042],
    [post201, { method: 'POST', status: '201' }, 0],
    [get200, { method: 'GET', status: '200' }, 0.1],
    [post201, { method: 'POST', status: '201' }, 7.3],
    [get200, { method: 'GET', status: '200' }, 0.30000000000000004],
    [get200, { method: 'GET', status: '200' }, 0.0042],
  ]
  for (const [series, labels, value] of observations) {
    series.observe(value)
    reference.observe(labels, value)
  }
  const text = await ours.metrics()
  t.equal(text, await theirs.metrics(), 'the text exposition')
  t.match(text, /answer_seconds_bucket\{le="0\.01",method="GET",status="200"\} 3\n/, 'cumulative buckets')
  t.match(text, /answer_seconds_bucket\{le="\+Inf",method="POST",status="201"\} 2\n/, 'above every bound: +Inf only')
  t.same(await ours.getMetricsAsJSON(), await theirs.getMetricsAsJSON(), 'the JSON form')
  t.equal(get200.count, 5)

  ours.resetMetrics()
  theirs.resetMetrics()
  t.equal(await ours.metrics(), await theirs.metrics(), 'after a reset')
})

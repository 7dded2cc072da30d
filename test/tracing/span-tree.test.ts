// Tracing end to end: the real server with the standard OTEL_* variables exports its spans over
// OTLP/HTTP (JSON) to a collector stand-in in this test. A write's tree is checked (server span,
// idempotency read, the transaction's statements, the rate-limit decision in Redis), and that
// no attribute carries the API key, an Idempotency-Key or any value the request sent.
import t, { type Test } from 'tap'
import { randomBytes, randomUUID } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import { connect } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { waitFor } from '../helpers/wait.js'
import { createTestDatabase } from '../helpers/database.js'
import { startServer } from '../helpers/server-process.js'
import { startPrivateRedis } from '../helpers/private-redis.js'

t.setTimeout(180_000)

interface OtlpValue {
  stringValue?: string
  intValue?: string | number
  boolValue?: boolean
  doubleValue?: number
}
interface Span {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  startTimeUnixNano: string
  status?: { code?: number }
  attributes: Record<string, unknown>
}

/** A collector stand-in: every span POSTed to /v1/traces, and the paths anything was sent to. */
async function otlpSink(t: Test): Promise<{ url: string; spans: Span[]; paths: string[] }> {
  const spans: Span[] = []
  const paths: string[] = []
  const server: Server = createServer((req, res) => {
    let body = ''
    req.on('data', (d) => (body += d))
    req.on('end', () => {
      paths.push(`${req.headers['content-type']} ${req.url}`)
      if (req.url === '/v1/traces') {
        const doc = JSON.parse(body)
        for (const rs of doc.resourceSpans ?? [])
          for (const ss of rs.scopeSpans ?? [])
            for (const s of ss.spans ?? []) {
              const attributes: Record<string, unknown> = {}
              for (const a of s.attributes ?? []) {
                const v = a.value as OtlpValue
                attributes[a.key] = v.stringValue ?? v.intValue ?? v.boolValue ?? v.doubleValue
              }
              spans.push({ ...s, attributes })
            }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const { port } = server.address() as { port: number }
  return { url: `http://127.0.0.1:${port}`, spans, paths }
}

const hex = (bytes: number) => randomBytes(bytes).toString('hex')

t.test(
  'a write traced from its traceparent: server span, idempotency read, the write in one statement; no secret or value',
  async (t) => {
    const sink = await otlpSink(t)
    const db = await createTestDatabase(t)
    const redis = await startPrivateRedis(t)
    const apiKey = `secret-${hex(12)}`
    const server = await startServer(t, {
      DATABASE_URL: db.url,
      REDIS_URL: redis.url,
      API_KEYS: apiKey,
      LOG_LEVEL: 'info',
      OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '1',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      // A loaded CI machine can stall past the 50 ms default; the fallback has its own tests.
      REDIS_COMMAND_TIMEOUT_MS: '1000',
      // Short enough for the stalled upload at the end; every other request arrives at once.
      REQUEST_TIMEOUT_MS: '3000',
    })
    // Decisions go to Redis once the store has connected: a request no longer counts a fallback.
    const fallbacks = async () => {
      const line = (await (await fetch(`${server.base}/metrics`)).text())
        .split('\n')
        .find((l) => l.startsWith('rate_limit_store_fallback_total'))
      return line ? Number(line.split(' ')[1]) : 0
    }
    for (let i = 0; i < 60; i++) {
      const before = await fallbacks()
      await fetch(`${server.base}/api/v1/user/${randomUUID()}/nobody`, { headers: { 'x-api-key': apiKey } })
      if ((await fallbacks()) === before) break
      await sleep(250)
    }

    const user = { system_user_id: `u-${hex(6)}`, system_uuid: randomUUID(), full_name: `Name ${hex(6)}` }
    const idempotencyKey = `idem-${hex(8)}`
    const traceId = hex(16)
    const parentId = hex(8)
    const headers = { 'x-api-key': apiKey, 'content-type': 'application/json', 'idempotency-key': idempotencyKey }
    const created = await fetch(`${server.base}/api/v1/user`, {
      method: 'POST',
      headers: { ...headers, traceparent: `00-${traceId}-${parentId}-01` },
      body: JSON.stringify(user),
    })
    t.equal(created.status, 201, await created.text())

    // A caller that did not sample: its decision is honoured (parent-based), nothing is exported.
    const unsampledTrace = hex(16)
    const read = await fetch(`${server.base}/api/v1/user/${user.system_uuid}/${user.system_user_id}`, {
      headers: { 'x-api-key': apiKey, traceparent: `00-${unsampledTrace}-${hex(8)}-00` },
    })
    t.equal(read.status, 200)
    // A root request: sampled at ratio 1.
    const rootRead = await fetch(`${server.base}/api/v1/user/${user.system_uuid}/${user.system_user_id}`, {
      headers: { 'x-api-key': apiKey },
    })
    t.equal(rootRead.status, 200)
    for (const path of ['/live', '/ready', '/metrics'])
      t.equal((await fetch(`${server.base}${path}`)).status, 200, path)

    const ofTrace = (id: string) => sink.spans.filter((s) => s.traceId === id)
    const serverSpanOf = (id: string) => ofTrace(id).some((s) => s.kind === 2)
    // Every span that ended before now has arrived once a later request's span has: the batch
    // processor exports in the order spans end, one batch at a time.
    const exportedSoFar = async () => {
      const marker = hex(16)
      const res = await fetch(`${server.base}/api/v1/user/${randomUUID()}/marker`, {
        headers: { 'x-api-key': apiKey, traceparent: `00-${marker}-${hex(8)}-01` },
      })
      await res.arrayBuffer()
      await waitFor("a later request's span to be exported", () => serverSpanOf(marker), {
        everyMs: 50,
        timeoutMs: 60_000,
      })
    }
    await waitFor("the write's server span to be exported", () => serverSpanOf(traceId), {
      everyMs: 50,
      timeoutMs: 60_000,
    })
    await exportedSoFar()
    const spans = ofTrace(traceId)
    t.ok(spans.length > 0, 'spans of the write arrived over OTLP/HTTP JSON')
    t.ok(
      sink.paths.every((p) => p === 'application/json /v1/traces'),
      `only traces, as JSON: ${[...new Set(sink.paths)].join(', ')}`,
    )

    t.comment(`spans of the write: ${spans.map((s) => s.name).join(' | ')}`)
    const serverSpan = spans.find((s) => s.kind === 2)!
    t.ok(serverSpan, 'a SERVER span')
    t.equal(serverSpan.name, 'POST /api/v1/user', 'named by method and route template')
    t.equal(serverSpan.parentSpanId, parentId, 'continues the caller’s traceparent')
    t.equal(serverSpan.attributes['http.response.status_code'], 201)

    const byId = new Map(spans.map((s) => [s.spanId, s]))
    const under = (s: Span): boolean => {
      for (let p = byId.get(s.parentSpanId ?? ''); p; p = byId.get(p.parentSpanId ?? ''))
        if (p === serverSpan) return true
      return false
    }
    const sqlSpans = spans
      .filter((s) => s.attributes['db.system.name'] === 'postgresql')
      .sort((a, b) => (BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1))
    t.ok(sqlSpans.length > 0 && sqlSpans.every(under), 'every statement is a descendant of the server span')
    t.ok(
      sqlSpans.every((s) => s.kind === 3),
      'statements are CLIENT spans',
    )
    const names = sqlSpans.map((s) => s.name)
    t.comment(`statements: ${names.join(' | ')}`)
    const firstRead = names.findIndex(
      (n) =>
        n.startsWith('SELECT') &&
        sqlSpans[names.indexOf(n)]!.attributes['db.query.text']?.toString().includes('idempotency_records'),
    )
    t.ok(firstRead !== -1, 'the idempotency read')
    // A new user is written with its stored answer in one statement (no transaction) after the read.
    t.same(
      names.slice(firstRead),
      ['SELECT idempotency_records', 'INSERT users'],
      'the read (named by the record table), then the user INSERT that carries the stored answer',
    )

    // One span per request: no span per hook or for the handler (each would cost every request,
    // sampled or not), so every statement (a transaction's BEGIN and COMMIT too) is a child of the server span.
    t.same(
      spans.filter((s) => s !== serverSpan && s.kind !== 3).map((s) => s.name),
      [],
      'no hook or handler spans: the server span and CLIENT spans only',
    )
    t.ok(
      sqlSpans.every((s) => s.parentSpanId === serverSpan.spanId),
      'statements are children of the server span',
    )

    const decision = spans.find((s) => s.name === 'ratelimit decide')
    t.ok(decision && under(decision), 'the rate-limit decision is a child span')
    t.equal(decision?.attributes['db.system.name'], 'redis')
    t.equal(decision?.attributes['ratelimit.shared'], true, 'decided in Redis')

    // Nothing the caller sent, and no secret, in any attribute of any span exported.
    const secrets = [apiKey, idempotencyKey, user.system_user_id, user.system_uuid, user.full_name]
    const leaks = sink.spans.flatMap((s) =>
      Object.entries(s.attributes)
        .filter(([, v]) => secrets.some((x) => String(v).includes(x)))
        .map(([k, v]) => `${s.name} ${k}=${v}`),
    )
    t.same(leaks, [], 'no attribute holds the API key, the Idempotency-Key or a request value')
    t.notOk(JSON.stringify(sink.spans).includes(apiKey), 'the API key appears nowhere in the export')

    t.same(ofTrace(unsampledTrace), [], 'an unsampled parent is honoured: nothing exported')
    const routes = sink.spans.filter((s) => s.kind === 2).map((s) => s.name)
    t.ok(routes.includes('GET /api/v1/user/{system_uuid}/{system_user_id}'), 'a root request is sampled at ratio 1')
    t.notOk(
      routes.some((r) => /live|ready|metrics/.test(r)),
      `probes and metrics are not traced: ${routes.join(', ')}`,
    )

    // The write's log line carries its trace and server span.
    const lines = server
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l))
    const done = lines.find((l) => l.msg === 'request completed' && l.status === 201)
    t.equal(done?.trace_id, traceId, 'the log line names the trace')
    t.equal(done?.span_id, serverSpan.spanId, 'and the server span')
    const unsampledLine = lines.find((l) => l.msg === 'request completed' && l.status === 200 && !l.trace_id)
    t.ok(unsampledLine, 'an unsampled request logs no trace id')

    // Reads at once, half from callers that sampled and half from callers that did not. The
    // rate-limit decisions of one event-loop turn share one Redis call (one reply for all of
    // them): each request's statements must still land in its own trace only.
    const mixed = Array.from({ length: 20 }, (_, i) => ({ trace: hex(16), sampled: i % 2 === 0 }))
    const answers = await Promise.all(
      mixed.map((m) =>
        fetch(`${server.base}/api/v1/user/${user.system_uuid}/${user.system_user_id}`, {
          headers: { 'x-api-key': apiKey, traceparent: `00-${m.trace}-${hex(8)}-0${m.sampled ? 1 : 0}` },
        }),
      ),
    )
    t.same(new Set(answers.map((a) => a.status)), new Set([200]), 'every concurrent read answered')
    const sampledTraces = mixed.filter((m) => m.sampled).map((m) => m.trace)
    const arrived = () => sampledTraces.every((id) => ofTrace(id).some((s) => s.kind === 2))
    await waitFor("the sampled reads' server spans to be exported", arrived, { everyMs: 50, timeoutMs: 60_000 })
    await exportedSoFar()
    const statementsOf = (id: string) => ofTrace(id).filter((s) => s.attributes['db.system.name'] === 'postgresql')
    const perRead = sampledTraces.map((id) => {
      const server = ofTrace(id).filter((s) => s.kind === 2)
      return server.length === 1 && statementsOf(id).every((s) => s.parentSpanId === server[0]!.spanId)
        ? statementsOf(id).length
        : -1
    })
    t.ok(perRead[0]! > 0, `a sampled read's statements: ${perRead[0]}`)
    t.same(
      perRead,
      perRead.map(() => perRead[0]),
      'each sampled read has one server span and the same statements under it, none of another request',
    )
    t.same(
      mixed.filter((m) => !m.sampled).flatMap((m) => ofTrace(m.trace)),
      [],
      'the unsampled reads exported nothing',
    )

    // Sampled uploads that never finish: one whose client sends half its body and leaves, one
    // whose client stalls until the server's request deadline closes it. No answer reaches either,
    // so no onResponse runs; each span must still end and be exported, marked with why.
    const cutShort = async (leave: boolean) => {
      const trace = hex(16)
      let answer = ''
      await new Promise<void>((resolve, reject) => {
        const socket = connect(Number(new URL(server.base).port), '127.0.0.1', () => {
          socket.write(
            `POST /api/v1/user HTTP/1.1\r\nhost: x\r\nx-api-key: ${apiKey}\r\ncontent-type: application/json\r\n` +
              `idempotency-key: idem-${hex(8)}\r\ntraceparent: 00-${trace}-${hex(8)}-01\r\n` +
              `content-length: 1000\r\n\r\n{"system_user_id":`,
          )
          if (leave) setTimeout(() => socket.destroy(), 300)
        })
        socket.on('data', (chunk) => (answer += chunk))
        socket.on('error', reject)
        socket.on('close', () => resolve())
      })
      for (let i = 0; i < 100 && !ofTrace(trace).some((s) => s.kind === 2); i++) await sleep(100)
      return { trace, answer, span: ofTrace(trace).find((s) => s.kind === 2) }
    }
    const logLines = () =>
      server
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l))
    const left = await cutShort(true)
    t.equal(left.answer, '', 'the client that left got no answer')
    t.equal(left.span?.name, 'POST /api/v1/user', 'the span of an upload its client cut short is exported')
    t.equal(left.span?.attributes['error.type'], 'client_aborted', 'error.type says why')
    t.equal(left.span?.attributes['http.response.status_code'], undefined, 'no status code: none was delivered')
    t.equal(left.span?.status?.code, 2, 'status ERROR')
    t.ok(
      logLines().find((l) => l.msg === 'client aborted' && l.trace_id === left.trace),
      'its log line names the trace that was exported',
    )

    const stalled = await cutShort(false)
    t.match(stalled.answer, /^HTTP\/1\.1 408 /, 'the stalled upload was answered 408 at the deadline')
    t.equal(stalled.span?.name, 'POST /api/v1/user', 'the span of an upload stopped by the deadline is exported')
    t.equal(stalled.span?.attributes['http.response.status_code'], 408, 'with the 408 its client got')
    t.equal(stalled.span?.attributes['error.type'], undefined, 'a 4xx is not an error of a server span')
    t.ok(
      logLines().find((l) => l.msg === 'request timed out' && l.trace_id === stalled.trace),
      'its log line names the trace that was exported',
    )
  },
)

t.test('without OTEL_* variables nothing of OpenTelemetry is loaded', async (t) => {
  const { tracingRequested } = await import('../../src/tracing/index.js')
  t.equal(tracingRequested({}), false, 'no variable: off')
  t.equal(tracingRequested({ OTEL_SERVICE_NAME: 'x' }), false, 'a name alone exports nothing: off')
  t.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), true)
  t.equal(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' }), true)
  t.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }), false)
  t.equal(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }), false)

  // The app module graph, built without tracing, never loads the SDK.
  const { buildApp } = await import('../../src/app.js')
  const { loadConfig } = await import('../../src/config.js')
  const db = await createTestDatabase(t)
  const app = await buildApp({ config: loadConfig({ API_KEYS: 'k', LOG_LEVEL: 'silent' }), sql: db.sql, logger: false })
  t.teardown(() => app.close())
  const loaded = Object.keys((await import('node:module')).createRequire(import.meta.url).cache ?? {}).filter((m) =>
    /@opentelemetry\/(sdk|exporter|instrumentation|context)|@fastify\/otel/.test(m),
  )
  // (prom-client loads @opentelemetry/api itself, for exemplars; the SDK is what costs.)
  t.same(loaded, [], 'no OpenTelemetry SDK, exporter or instrumentation module is loaded')
  t.notOk(app.printPlugins().includes('otel'), 'no OpenTelemetry plugin registered')
})

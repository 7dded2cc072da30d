// One client cannot stall another: each key (or address without one) has its own cap on
// requests in progress and on body bytes in flight (429 before the body is read), a body slower
// than the minimum upload rate is cut (408), best-effort traffic sheds before partners' reads
// and writes while probes never shed, and a free-form value past its cap is refused on the text.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { buildApp } from '../../src/app.js'
import { ConfigError, loadConfig } from '../../src/config.js'
import { createTestDatabase } from '../helpers/database.js'
import { fileEntry, writeKeyFile, writeRawKeyFile } from '../helpers/keys.js'
import { makeKey } from '../../src/auth/make-key.js'
import { postNewUser, settled, stallRequest } from '../helpers/stalled-request.js'

const BODY_LIMIT = 4096
const db = await createTestDatabase(t)
const keyFile = await writeKeyFile(t, [
  { id: 'narrow', secret: 'ssk_narrow', max_concurrent_requests: 2 },
  { id: 'small-bodies', secret: 'ssk_small', max_body_bytes_in_flight: BODY_LIMIT },
  { id: 'ingest-only', secret: 'ssk_ingest', scopes: ['telemetry:ingest'] },
  { id: 'partner', secret: 'ssk_partner' },
])
const config = loadConfig({
  API_KEYS_FILE: keyFile,
  LOG_LEVEL: 'silent',
  BODY_LIMIT_BYTES: String(BODY_LIMIT),
  BODY_BYTES_IN_FLIGHT_MAX: String(8 * BODY_LIMIT),
  CLIENT_MAX_BODY_BYTES_IN_FLIGHT: String(2 * BODY_LIMIT),
  // Stalled bodies are held until the test lets them go (the upload rate has its own server below).
  REQUEST_TIMEOUT_MS: '120000',
  REQUEST_BODY_MIN_BYTES_PER_SECOND: '0',
  LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0',
})
const app = await buildApp({ config, sql: db.sql, logger: false })
await app.listen({ port: 0, host: '127.0.0.1' })
t.teardown(() => app.close())
const { port } = app.server.address() as { port: number }
const base = `http://127.0.0.1:${port}`

/** Sends a request head and part of its body, then nothing more. */
const stall = (secret: string, part = '{"a":', declared = BODY_LIMIT, path = '/api/v1/user', to = port) =>
  stallRequest(
    to,
    `POST ${path} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${secret}\r\nContent-Type: application/json\r\n` +
      `Idempotency-Key: ${randomUUID()}\r\nContent-Length: ${declared}\r\n\r\n${part}`,
  )

/** A value read from an app's /metrics; a metric that is not there fails the test, never reads as 0. */
const metricOf = async (server: typeof app, pattern: RegExp) => {
  const match = pattern.exec((await server.inject({ method: 'GET', url: '/metrics' })).body)
  if (!match) throw new Error(`/metrics has no line matching ${pattern}`)
  return Number(match[1])
}
const metric = (pattern: RegExp) => metricOf(app, pattern)
const holding = () => metric(/^http_clients_holding (\d+)$/m)
const bytesInFlight = () => metric(/^http_request_body_bytes_in_flight (\d+)$/m)
const refusals = (reason: string, key: string) =>
  metric(new RegExp(`^http_client_refusals_total\\{reason="${reason}",key_id="${key}"\\} (\\d+)$`, 'm'))

const newUser = (secret: string, headers: Record<string, string> = {}) => postNewUser(base, secret, headers)
const readUser = (secret: string) =>
  fetch(`${base}/api/v1/user/${randomUUID()}/nobody`, { headers: { 'x-api-key': secret } })

t.test("a key's own max_concurrent_requests: the next request is 429 before its body; others unaffected", async (t) => {
  const held = [stall('ssk_narrow'), stall('ssk_narrow')]
  t.equal(await settled(holding, 1), 1, 'one client holds two requests')
  const refused = await newUser('ssk_narrow')
  t.equal(refused.status, 429)
  t.same(await refused.json(), {
    code: 'COMMON_429',
    key: 'SECURITY_CONCURRENT_REQUESTS_EXCEEDED',
    message: 'Too many requests of this client are in progress; retry after the number of seconds in Retry-After.',
    source: 'security',
  })
  t.equal(refused.headers.get('retry-after'), '1')
  t.equal(refused.headers.get('connection'), 'close', 'refused before its body was read')
  t.equal((await readUser('ssk_narrow')).status, 429, 'reads count too')
  t.equal((await newUser('ssk_partner')).status, 201, 'another key is not held back')
  t.equal(await refusals('concurrent_requests', 'narrow'), 2, '/metrics names the reason and the key id')

  // A client that leaves (abort) gives its request back.
  held[0]!.socket.destroy()
  t.equal(
    await settled(async () => (await readUser('ssk_narrow')).status, 404),
    404,
    'after an abort it may call again',
  )
  held[1]!.socket.destroy()
  t.equal(await settled(holding, 0), 0, 'nothing held once all have ended')
})

t.test("a client's body bytes in flight: past its share 429 unread, the process budget stays for others", async (t) => {
  const first = stall('ssk_small')
  t.equal(await settled(bytesInFlight, BODY_LIMIT), BODY_LIMIT)
  const refused = await newUser('ssk_small')
  t.equal(refused.status, 429)
  t.equal((await refused.json()).key, 'SECURITY_BODY_BYTES_IN_FLIGHT_EXCEEDED')
  t.equal(refused.headers.get('connection'), 'close')
  t.equal((await readUser('ssk_small')).status, 404, 'a request without a body is not held back')

  // The default share (CLIENT_MAX_BODY_BYTES_IN_FLIGHT, two bodies here) for a key without its own.
  const partner = [stall('ssk_partner'), stall('ssk_partner')]
  t.equal(await settled(bytesInFlight, 3 * BODY_LIMIT), 3 * BODY_LIMIT)
  t.equal((await newUser('ssk_partner')).status, 429, 'the third body of one key does not fit its share')
  t.equal((await newUser('ssk_narrow')).status, 201, 'the process budget still has room for another key')
  t.equal(await refusals('body_bytes_in_flight', 'small-bodies'), 1)
  t.equal(await refusals('body_bytes_in_flight', 'partner'), 1)

  first.socket.destroy()
  for (const s of partner) s.socket.destroy()
  t.equal(await settled(bytesInFlight, 0), 0, 'every ending gives the bytes back')
  t.equal((await newUser('ssk_small')).status, 201)
})

t.test('a body slower than the minimum upload rate is cut with 408 REQUEST_BODY_TOO_SLOW', async (t) => {
  // The request deadline is far: a 408 here is the upload rate's.
  const rated = await buildApp({
    config: loadConfig({
      API_KEYS_FILE: keyFile,
      LOG_LEVEL: 'silent',
      BODY_LIMIT_BYTES: String(BODY_LIMIT),
      REQUEST_TIMEOUT_MS: '120000',
      REQUEST_BODY_MIN_BYTES_PER_SECOND: '1024',
      REQUEST_BODY_GRACE_MS: '300',
      LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0',
    }),
    sql: db.sql,
    logger: false,
  })
  await rated.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => rated.close())
  const ratedPort = (rated.server.address() as { port: number }).port
  const ratedMetric = (pattern: RegExp) => metricOf(rated, pattern)
  const slow = stall('ssk_ingest', '{"event":"', 1000, '/api/v1/telemetry/docs-search', ratedPort)
  // One byte now and then: far under 1024 bytes/s.
  const drip = setInterval(() => slow.socket.write('x'), 200)
  const { status, body } = await slow.answered
  clearInterval(drip)
  t.equal(status, 408)
  t.same(JSON.parse(body), {
    code: 'COMMON_408',
    key: 'REQUEST_BODY_TOO_SLOW',
    message: 'The request body arrived slower than the minimum upload rate.',
    source: 'business',
  })
  const ratedBytes = () => ratedMetric(/^http_request_body_bytes_in_flight (\d+)$/m)
  t.equal(await settled(ratedBytes, 0), 0, 'its reservation is given back')
  t.equal(await settled(() => ratedMetric(/^http_clients_holding (\d+)$/m), 0), 0)
  t.equal(await ratedMetric(/^http_client_refusals_total\{reason="min_upload_rate",key_id="ingest-only"\} (\d+)$/m), 1)
  const whole = await fetch(`http://127.0.0.1:${ratedPort}/api/v1/telemetry/docs-search`, {
    method: 'POST',
    headers: { 'x-api-key': 'ssk_ingest', 'content-type': 'application/json' },
    body: JSON.stringify({ event: 'search_query', emitted_at_ms: Date.now() }),
  })
  t.equal(whole.status, 202, 'a body sent at once is not affected')
})

t.test('a Content-Encoding the service does not decode is 415 before the body is read', async (t) => {
  const gz = await newUser('ssk_partner', { 'content-encoding': 'gzip' })
  t.equal(gz.status, 415)
  t.same(await gz.json(), {
    code: 'COMMON_415',
    key: 'UNSUPPORTED_CONTENT_ENCODING',
    message: 'Request bodies must be sent without a Content-Encoding.',
    source: 'business',
  })
  t.equal((await newUser('ssk_partner', { 'content-encoding': 'identity' })).status, 201, 'identity is no encoding')
})

t.test('a free-form value of 90,000 keys is refused on the text, at its cap', async (t) => {
  const keys = `{${Array.from({ length: 90_000 }, (_, i) => `"k${i}":1`).join(',')}}`
  const big = (field: string) =>
    JSON.stringify({ events: [{ event: 'search_query', emitted_at_ms: 1, [field]: '§' }] }).replace('"§"', keys)
  // With the default body limit: the prescan answers (test/validation covers the items).
  const wide = await buildApp({
    config: loadConfig({ API_KEYS: 'wide', LOG_LEVEL: 'silent', LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0' }),
    sql: db.sql,
    logger: false,
  })
  t.teardown(() => wide.close())
  const post = (body: string, url = '/api/v1/telemetry/docs-search/batch') =>
    wide.inject({
      method: 'POST',
      url,
      headers: { 'x-api-key': 'wide', 'content-type': 'application/json', 'idempotency-key': randomUUID() },
      payload: body,
    })
  const payload = await post(big('payload'))
  t.equal(payload.statusCode, 422)
  t.match(payload.json().errors, [
    { code: 'TELEMETRY_019', details: { loc: ['body', 'events', 0, 'payload'], type: 'x-max-json-bytes' } },
  ])
  const topResults = await post(big('top_results').replace(keys, `[${keys}]`))
  t.equal(topResults.statusCode, 422)
  t.match(topResults.json().errors, [{ code: 'TELEMETRY_018', details: { loc: ['body', 'events', 0, 'top_results'] } }])
  const context = await post(
    JSON.stringify({ system_user_id: 'u', system_uuid: randomUUID(), message: 'm', context: '§' }).replace('"§"', keys),
    '/api/v1/errors',
  )
  t.equal(context.statusCode, 422)
  t.match(context.json().errors, [{ code: 'ERRLOG_006', details: { loc: ['body', 'context'] } }])
  // Just under the cap, spread over a large batch: accepted.
  const under = `{${Array.from({ length: 1500 }, (_, i) => `"k${i}":1`).join(',')}}`
  const events = Array.from({ length: 40 }, () => `{"event":"search_query","emitted_at_ms":1,"payload":${under}}`)
  t.equal((await post(`{"events":[${events.join(',')}]}`)).statusCode, 202, 'payloads within the cap pass')
})

t.test('key file: the new fields are checked; no key may take more than half the process budget', async (t) => {
  const entry = (extra: Record<string, unknown>) =>
    writeKeyFile(t, [{ id: 'k', secret: 'ssk_k', ...(extra as object) }])
  const tooMuch = await entry({ max_body_bytes_in_flight: 20 * 1_048_576 })
  t.throws(() => loadConfig({ API_KEYS_FILE: tooMuch }), {
    constructor: ConfigError,
    message:
      /"max_body_bytes_in_flight" must be from BODY_LIMIT_BYTES \(1048576\) to half of BODY_BYTES_IN_FLIGHT_MAX \(16777216\)/,
  })
  const zero = await entry({ max_concurrent_requests: 0 })
  t.throws(() => loadConfig({ API_KEYS_FILE: zero }), {
    message: /"max_concurrent_requests" must be an integer from 1/,
  })
  t.throws(() => loadConfig({ CLIENT_MAX_BODY_BYTES_IN_FLIGHT: '33554432' }), {
    message: /CLIENT_MAX_BODY_BYTES_IN_FLIGHT must be an integer from 1048576 to 16777216/,
  })
  t.equal(loadConfig({}).client.maxBodyBytesInFlight, 4 * 1_048_576, 'default: an eighth of the process budget')
  const rotated = await writeRawKeyFile(
    t,
    JSON.stringify([
      { ...fileEntry({ id: 'r', secret: 'ssk_old' }), max_concurrent_requests: 4 },
      { ...fileEntry({ id: 'r', secret: 'ssk_new' }), max_concurrent_requests: 8 },
    ]),
  )
  t.throws(() => loadConfig({ API_KEYS_FILE: rotated }), {
    message: /"max_concurrent_requests" differs from entry 0 with the same id/,
  })
  const made = makeKey({ ID: 'made', MAX_CONCURRENT_REQUESTS: '5', MAX_BODY_BYTES_IN_FLIGHT: '2097152' })
  t.match(made.entry, { max_concurrent_requests: 5, max_body_bytes_in_flight: 2_097_152 }, 'make key writes them')
})

t.test('shedding order: best-effort telemetry ingest sheds first, partners later, probes never', async (t) => {
  const ingest = (app: Awaited<ReturnType<typeof buildApp>>) =>
    app.inject({
      method: 'POST',
      url: '/api/v1/telemetry/docs-search',
      headers: { 'x-api-key': 'shed', 'content-type': 'application/json' },
      payload: { event: 'search_query', emitted_at_ms: 1 },
    })
  const read = (app: Awaited<ReturnType<typeof buildApp>>) =>
    app.inject({ method: 'GET', url: `/api/v1/user/${randomUUID()}/nobody`, headers: { 'x-api-key': 'shed' } })
  const live = (app: Awaited<ReturnType<typeof buildApp>>) => app.inject({ method: 'GET', url: '/live' })
  const strainedApp = async (maxHeap: number, fraction: string) => {
    const shedding = await buildApp({
      config: loadConfig({
        API_KEYS: 'shed',
        LOG_LEVEL: 'silent',
        LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0',
        LOAD_SHED_MAX_HEAP_USED_BYTES: String(maxHeap),
        LOAD_SHED_BEST_EFFORT_FRACTION: fraction,
      }),
      sql: db.sql,
      logger: false,
    })
    t.teardown(() => shedding.close())
    await shedding.ready()
    return shedding
  }

  // The heap sits at about a third of its threshold: past the best-effort fraction (0.1), under
  // the threshold itself. Samples are taken once a second after two of settling.
  const strained = await strainedApp(3 * process.memoryUsage().heapUsed, '0.1')
  t.equal(await settled(async () => (await ingest(strained)).statusCode, 503), 503, 'telemetry ingest sheds')
  const shedIngest = await ingest(strained)
  t.equal(shedIngest.json().key, 'SERVICE_OVERLOADED')
  t.ok(shedIngest.headers['retry-after'])
  t.equal((await read(strained)).statusCode, 404, "a partner's read still answers")
  t.equal((await live(strained)).statusCode, 200, 'probes answer')

  // Past the threshold itself: partners shed too; probes still answer.
  const overloaded = await strainedApp(1_048_576, '0.5')
  t.equal(await settled(async () => (await read(overloaded)).statusCode, 503), 503, "a partner's read sheds")
  t.equal((await ingest(overloaded)).statusCode, 503)
  t.equal((await live(overloaded)).statusCode, 200, '/live never sheds')
})

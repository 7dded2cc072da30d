// The HTTP edge over a real socket: timeouts, early close, parser-level answers, undeclared
// methods, client aborts. Every answer is a declared status with the envelope and X-Request-Id.
import t from 'tap'
import { connect, type Socket } from 'node:net'
import { Writable } from 'node:stream'
import { randomUUID } from 'node:crypto'
import pino from 'pino'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { type OperationInfo, operations } from '../../generated/operations.js'
import { createTestDatabase } from '../helpers/database.js'

const REQUEST_TIMEOUT_MS = 1000
const db = await createTestDatabase(t)
const lines: Record<string, unknown>[] = []
const sink = new Writable({
  write(chunk, _enc, cb) {
    for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line))
    cb()
  },
})
const config = loadConfig({
  API_KEYS: 'edge-key',
  LOG_LEVEL: 'info',
  REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
  LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0',
})
const app = await buildApp({ config, sql: db.sql, logger: pino({ level: 'info' }, sink) })
await app.listen({ port: 0, host: '127.0.0.1' })
t.teardown(() => app.close())
const { port } = app.server.address() as { port: number }

interface RawAnswer {
  text: string
  status: number
  headers: Record<string, string>
  body: string
  /** ms from the first byte sent to the server closing the connection */
  closedAfterMs: number
}

/** Sends raw bytes and collects everything until the server closes the connection. */
function exchange(
  data: string | Buffer,
  { keepOpenMs = 10_000, afterConnect }: { keepOpenMs?: number; afterConnect?: (s: Socket) => void } = {},
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const started = performance.now()
    let text = ''
    const guard = setTimeout(() => {
      socket.destroy()
      reject(new Error(`server kept the connection open for ${keepOpenMs} ms; got: ${text.slice(0, 200)}`))
    }, keepOpenMs)
    socket.on('data', (c) => (text += c))
    socket.on('error', () => {})
    socket.on('close', () => {
      clearTimeout(guard)
      const [head = '', body = ''] = text.split('\r\n\r\n')
      const [statusLine = '', ...headerLines] = head.split('\r\n')
      const headers = Object.fromEntries(
        headerLines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      )
      resolve({
        text,
        status: Number(statusLine.split(' ')[1]),
        headers,
        body,
        closedAfterMs: performance.now() - started,
      })
    })
    socket.write(data)
    afterConnect?.(socket)
  })
}

const envelopeOf = (answer: RawAnswer) => JSON.parse(answer.body) as Record<string, string>

t.test(
  'a body that trickles past REQUEST_TIMEOUT_MS gets 408 with the envelope and the connection is closed',
  async (t) => {
    const answer = await exchange(
      'POST /api/v1/user HTTP/1.1\r\nHost: x\r\nX-API-Key: edge-key\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"a":',
    )
    t.equal(answer.status, 408)
    t.match(envelopeOf(answer), { code: 'COMMON_408', key: 'REQUEST_TIMEOUT', source: 'business' })
    t.ok(answer.headers['x-request-id'], 'carries X-Request-Id')
    t.ok(
      answer.closedAfterMs >= REQUEST_TIMEOUT_MS - 50,
      `not before the deadline (${Math.round(answer.closedAfterMs)} ms)`,
    )
  },
)

t.test(
  'a request the server times out is logged as timed out with its request id, never as a client that aborted',
  async (t) => {
    const before = lines.length
    const answer = await exchange(
      'POST /api/v1/user HTTP/1.1\r\nHost: x\r\nX-API-Key: edge-key\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"a":',
    )
    t.equal(answer.status, 408)
    // The request's own failure (its body cut off by the close) is logged on the next tick.
    await new Promise((r) => setTimeout(r, 100))
    const fresh = lines.slice(before)
    t.notOk(
      fresh.some((l) => l.msg === 'client aborted'),
      'the client did not abort: the server closed it',
    )
    t.ok(
      fresh.some((l) => l.msg === 'request timed out' && typeof l.reqId === 'string'),
      'the timed-out request is named by its request id',
    )
  },
)

t.test('headers that never finish get the same 408', async (t) => {
  const answer = await exchange('GET /live HTTP/1.1\r\nHost: x\r\nX-Slow: ')
  t.equal(answer.status, 408)
  t.equal(envelopeOf(answer).code, 'COMMON_408')
})

t.test('an answer given before the body is read closes the connection instead of waiting for the body', async (t) => {
  const head = (path: string, key: string) =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\n${key}Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"a":`
  for (const [path, key, status] of [
    ['/api/v1/user', '', 401],
    ['/api/v1/nothing', '', 404],
    ['/api/v1/user', 'X-API-Key: edge-key\r\n', 413],
  ] as const) {
    const answer = await exchange(head(path, key).replace('1000000', status === 413 ? '2000000' : '1000000'), {
      keepOpenMs: REQUEST_TIMEOUT_MS / 2,
    })
    t.equal(answer.status, status, path)
    t.equal(answer.headers.connection, 'close', `${status}: Connection: close`)
    t.ok(answer.headers['x-request-id'])
  }
})

t.test('an oversize header section is 431 with the envelope', async (t) => {
  const answer = await exchange(`GET /live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`)
  t.equal(answer.status, 431)
  t.match(envelopeOf(answer), { code: 'COMMON_431', key: 'REQUEST_HEADERS_TOO_LARGE' })
  t.ok(answer.headers['x-request-id'])
})

t.test('malformed HTTP is 400 MALFORMED_REQUEST with the envelope, never Node\'s bare "Client Error"', async (t) => {
  for (const raw of [
    'GARBAGE\r\n\r\n',
    'GET /live HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
    'GET /live HTTP/1.1\r\nBad Header\r\n\r\n',
  ]) {
    const answer = await exchange(raw)
    t.equal(answer.status, 400, JSON.stringify(raw))
    t.match(envelopeOf(answer), { code: 'COMMON_400', key: 'MALFORMED_REQUEST' })
    t.ok(answer.headers['x-request-id'])
  }
})

t.test('an undecodable URL is 400 MALFORMED_REQUEST and the path is not echoed', async (t) => {
  const answer = await app.inject({
    method: 'GET',
    url: '/api/v1/user/%zz-secret-path/x',
    headers: { 'x-api-key': 'edge-key' },
  })
  t.equal(answer.statusCode, 400)
  t.match(answer.json(), { code: 'COMMON_400', key: 'MALFORMED_REQUEST', source: 'business' })
  t.notMatch(answer.body, /secret-path/)
  t.ok(answer.headers['x-request-id'])
})

t.test('a path parameter of any length reaches validation (422), never a 414', async (t) => {
  const answer = await app.inject({
    method: 'GET',
    url: `/api/v1/user/${randomUUID()}/${'a'.repeat(500)}`,
    headers: { 'x-api-key': 'edge-key' },
  })
  t.equal(answer.statusCode, 422)
  t.equal(answer.json().errors[0].code, 'COMMON_422')
})

t.test(
  'a method the path does not declare is 405 with Allow; OPTIONS is 204 with Allow; unknown paths stay 404',
  async (t) => {
    const uuid = randomUUID()
    for (const [method, url, allow] of [
      ['DELETE', '/api/v1/user', 'POST, OPTIONS'],
      ['POST', `/api/v1/user/${uuid}/x`, 'GET, PUT, PATCH, DELETE, OPTIONS'],
      ['HEAD', '/live', 'GET, OPTIONS'],
      ['QUERY', '/api/v1/errors', 'GET, POST, OPTIONS'],
    ] as const) {
      const res = await app.inject({ method: method as 'GET', url, headers: { 'x-api-key': 'edge-key' } })
      t.equal(res.statusCode, 405, `${method} ${url}`)
      t.equal(res.headers.allow, allow)
      if (method !== 'HEAD') t.match(res.json(), { code: 'COMMON_405', key: 'METHOD_NOT_ALLOWED' })
      t.ok(res.headers['x-request-id'])
    }
    const options = await app.inject({ method: 'OPTIONS', url: `/api/v1/conspectuses/${uuid}` })
    t.equal(options.statusCode, 204)
    t.equal(options.headers.allow, 'GET, PATCH, DELETE, OPTIONS')
    const missing = await app.inject({ method: 'DELETE', url: '/api/v2/nothing' })
    t.equal(missing.statusCode, 404)
    t.equal(missing.json().code, 'COMMON_404')
  },
)

t.test('HEAD answers 405 with Allow on every GET route, the pages outside the contract too', async (t) => {
  const uuid = randomUUID()
  const contractGets = (Object.values(operations) as OperationInfo[])
    .filter((op) => op.method === 'GET')
    .map((op) => op.path.replace(/\{[a-z_]+\}/g, (name) => (name.includes('uuid') ? uuid : 'x')))
  const pages = ['/docs', '/docs/json', '/docs/static/index.html', '/analytics', '/analytics/app.js', '/metrics']
  t.ok(contractGets.length > 15, `${contractGets.length} GET operations`)
  for (const url of [...contractGets, ...pages]) {
    t.equal((await app.inject({ method: 'GET', url })).statusCode === 404, false, `GET ${url} is a route`)
    const head = await app.inject({ method: 'HEAD', url, headers: { 'x-api-key': 'edge-key' } })
    t.equal(head.statusCode, 405, `HEAD ${url}`)
    t.match(head.headers.allow, /^GET\b.*OPTIONS$/, `HEAD ${url}: Allow names GET`)
    t.equal(head.body, '', `HEAD ${url}: no body`)
  }
  const unknown = await app.inject({ method: 'HEAD', url: '/nothing-here' })
  t.equal(unknown.statusCode, 404, 'a path that does not exist stays 404')
})

t.test(
  'a client that aborts an upload is logged at info as "client aborted", never as a database outage',
  async (t) => {
    const before = lines.length
    await new Promise<void>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(
          'POST /api/v1/user HTTP/1.1\r\nHost: x\r\nX-API-Key: edge-key\r\nContent-Type: application/json\r\nIdempotency-Key: abort-1\r\nContent-Length: 5000\r\n\r\n{"system_user_id":',
        )
        setTimeout(() => {
          socket.resetAndDestroy()
          resolve()
        }, 100)
      })
      socket.on('error', () => {})
    })
    // The server notices the reset on its next read.
    for (let i = 0; i < 50 && !lines.slice(before).some((l) => l.msg === 'client aborted'); i++)
      await new Promise((r) => setTimeout(r, 20))
    const fresh = lines.slice(before)
    t.ok(
      fresh.some((l) => l.msg === 'client aborted' && l.level === 30),
      'logged as client aborted at info',
    )
    t.notOk(
      fresh.some((l) => l.msg === 'database unavailable'),
      'not a database outage',
    )
    t.notOk(
      fresh.some((l) => (l.level as number) >= 50),
      'nothing at ERROR',
    )
  },
)

t.test('answers given at the edge and uploads their clients cut short are counted in /metrics', async (t) => {
  const metrics = async () => (await app.inject({ method: 'GET', url: '/metrics' })).body
  const sample = (text: string, name: string, labels: string) =>
    Number(
      text
        .split('\n')
        .find((l) => l.startsWith(`${name}{${labels}} `))
        ?.split(' ')[1] ?? 0,
    )
  const edge = {
    408: 'status="408",code="COMMON_408",key="REQUEST_TIMEOUT"',
    431: 'status="431",code="COMMON_431",key="REQUEST_HEADERS_TOO_LARGE"',
    400: 'status="400",code="COMMON_400",key="MALFORMED_REQUEST"',
  }
  const abortedLabels = 'method="POST",path_template="/api/v1/user"'
  const before = await metrics()

  t.equal((await exchange('GET /live HTTP/1.1\r\nHost: x\r\nX-Slow: ')).status, 408)
  t.equal((await exchange(`GET /live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`)).status, 431)
  t.equal((await exchange('GARBAGE\r\n\r\n')).status, 400)
  const upload =
    'POST /api/v1/user HTTP/1.1\r\nHost: x\r\nX-API-Key: edge-key\r\nContent-Type: application/json\r\n' +
    'Idempotency-Key: metrics-1\r\nContent-Length: 5000\r\n\r\n{"system_user_id":'
  // An upload that stalls: the edge answers 408 at the deadline (an edge answer, not an abort).
  t.equal((await exchange(upload)).status, 408)
  // An upload whose client leaves: no answer at all.
  const logged = lines.length
  await exchange(upload, { afterConnect: (socket) => setTimeout(() => socket.resetAndDestroy(), 100) })
  for (let i = 0; i < 50 && !lines.slice(logged).some((l) => l.msg === 'client aborted'); i++)
    await new Promise((r) => setTimeout(r, 20))

  const after = await metrics()
  const delta = (name: string, labels: string) => sample(after, name, labels) - sample(before, name, labels)
  t.equal(delta('http_errors_total', edge[408]), 2, 'both 408s written at the edge')
  t.equal(delta('http_errors_total', edge[431]), 1, 'the 431')
  t.equal(delta('http_errors_total', edge[400]), 1, 'the malformed request')
  t.equal(delta('http_requests_aborted_total', abortedLabels), 1, 'the upload its client cut short, by route')
})

t.test('framework and parser refusals are logged below ERROR', async (t) => {
  t.notOk(
    lines.some((l) => (l.level as number) >= 50),
    'no ERROR line in this whole file',
  )
})

// The cap on request-body bytes in flight (BODY_BYTES_IN_FLIGHT_MAX) over a real socket: bodies
// that stall hold their reservation, a body past the budget is refused 503 before it is read,
// and every way a request ends (answered, aborted, timed out) gives its bytes back. Each key
// holds at most its own share (test/platform/client-fairness.test.ts), so the budget is filled
// here by several keys.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { buildApp } from '../../src/app.js'
import { ConfigError, loadConfig } from '../../src/config.js'
import { createTestDatabase } from '../helpers/database.js'
import { postNewUser, settled, stallRequest } from '../helpers/stalled-request.js'

const BODY_LIMIT = 4096
const BUDGET = 2 * BODY_LIMIT
const REQUEST_TIMEOUT_MS = 1500
const db = await createTestDatabase(t)
const config = loadConfig({
  API_KEYS: 'budget-key,budget-key-2,budget-key-3',
  LOG_LEVEL: 'silent',
  BODY_LIMIT_BYTES: String(BODY_LIMIT),
  BODY_BYTES_IN_FLIGHT_MAX: String(BUDGET),
  REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
  LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0',
  LOAD_SHED_RETRY_AFTER_SECONDS: '4',
})
const app = await buildApp({ config, sql: db.sql, logger: false })
await app.listen({ port: 0, host: '127.0.0.1' })
t.teardown(() => app.close())
const { port } = app.server.address() as { port: number }

const KEY = 'X-API-Key: budget-key\r\n'
const KEY2 = 'X-API-Key: budget-key-2\r\n'
const KEY3 = 'X-API-Key: budget-key-3\r\n'
const head = (declared: string, key = KEY) =>
  `POST /api/v1/user HTTP/1.1\r\nHost: x\r\n${key}Content-Type: application/json\r\nIdempotency-Key: ${randomUUID()}\r\n${declared}\r\n`

/** Sends a head and part of a body, then nothing more. */
const stall = (declared: string, part: string, key = KEY) => stallRequest(port, head(declared, key) + part)

const inFlight = async () => {
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body
  return Number(/^http_request_body_bytes_in_flight (\d+)$/m.exec(text)?.[1])
}

/** The gauge once the server has seen what was sent (reservations happen on the server's time). */
const inFlightSettled = (expected: number) => settled(inFlight, expected)

const newUser = () => postNewUser(`http://127.0.0.1:${port}`, 'budget-key')

t.test(
  'stalled bodies hold the budget; a body past it is refused 503 unread; bodiless routes still answer',
  async (t) => {
    t.equal(await inFlight(), 0, 'nothing reserved at rest')
    const stalled = [
      stall(`Content-Length: ${BODY_LIMIT}\r\n`, '{"a":'),
      stall(`Content-Length: ${BODY_LIMIT}\r\n`, '{"a":', KEY2),
    ]
    t.equal(await inFlightSettled(BUDGET), BUDGET, 'two stalled bodies reserve their declared lengths')

    const refused = await newUser()
    t.equal(refused.status, 503)
    t.same(await refused.json(), {
      code: 'COMMON_503',
      key: 'SERVICE_OVERLOADED',
      message: 'The service is overloaded; retry after the number of seconds in Retry-After.',
      source: 'internal',
    })
    t.equal(refused.headers.get('retry-after'), '4')
    t.equal(refused.headers.get('connection'), 'close', 'refused before its body was read: the connection closes')
    t.ok(refused.headers.get('x-request-id'))

    const read = await fetch(`http://127.0.0.1:${port}/api/v1/user/${randomUUID()}/nobody`, {
      headers: { 'x-api-key': 'budget-key' },
    })
    t.equal(read.status, 404, 'a route without a body is not held back by the budget')

    stalled[0]!.socket.destroy()
    t.equal(await inFlightSettled(BODY_LIMIT), BODY_LIMIT, 'a client that leaves gives its bytes back')
    t.equal((await newUser()).status, 201, 'and the next body fits')
    stalled[1]!.socket.destroy()
    t.equal(await inFlightSettled(0), 0)
  },
)

t.test('a stalled body that times out (408) gives its bytes back', async (t) => {
  const stalled = stall(`Content-Length: ${BODY_LIMIT}\r\n`, '{"a":')
  t.equal(await inFlightSettled(BODY_LIMIT), BODY_LIMIT)
  t.equal((await stalled.answered).status, 408)
  t.equal(await inFlightSettled(0), 0)
})

t.test('answered requests give their bytes back: many bodies in a row all fit', async (t) => {
  const statuses = []
  for (let i = 0; i < 20; i++) statuses.push((await newUser()).status)
  t.same(new Set(statuses), new Set([201]))
  t.equal(await inFlightSettled(0), 0)
})

t.test('a chunked body reserves the whole body limit', async (t) => {
  const first = stall('Transfer-Encoding: chunked\r\n', '5\r\n{"a":\r\n')
  const second = stall('Transfer-Encoding: chunked\r\n', '5\r\n{"a":\r\n', KEY2)
  t.equal(await inFlightSettled(BUDGET), BUDGET)
  const third = stall('Content-Length: 10\r\n', '{"a":', KEY3)
  t.equal((await third.answered).status, 503, 'even a short body does not fit in a full budget')
  first.socket.destroy()
  second.socket.destroy()
  t.equal(await inFlightSettled(0), 0)
})

t.test('a caller without a key reserves nothing: refused 401 before its body', async (t) => {
  const anonymous = [1, 2, 3].map(() => stall(`Content-Length: ${BODY_LIMIT}\r\n`, '{"a":', ''))
  t.same(await Promise.all(anonymous.map(async (s) => (await s.answered).status)), [401, 401, 401])
  t.equal(await inFlight(), 0)
  t.equal((await newUser()).status, 201)
})

t.test('the budget cannot be smaller than one body; 0 turns it off', async (t) => {
  t.throws(() => loadConfig({ BODY_LIMIT_BYTES: '4096', BODY_BYTES_IN_FLIGHT_MAX: '4095' }), {
    constructor: ConfigError,
    message: /BODY_BYTES_IN_FLIGHT_MAX must be 0 or at least BODY_LIMIT_BYTES \(4096\)/,
  })
  t.equal(loadConfig({ BODY_BYTES_IN_FLIGHT_MAX: '0' }).bodyBytesInFlightMax, 0)
  t.equal(loadConfig({}).bodyBytesInFlightMax, 32 * 1024 * 1024)
})

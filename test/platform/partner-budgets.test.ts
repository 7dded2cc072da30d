// A partner's keys share its budgets: a partner key allowed 4 requests in progress creates 8
// keys, and each opens 4 uploads that announce 1 MiB and stall. The partner holds what its root
// may (4 requests, its body bytes), every other upload is 429 before its body is read, the
// process-wide body budget keeps room, and another partner's writes meanwhile all succeed.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { createTestDatabase } from '../helpers/database.js'
import { writeKeyFile } from '../helpers/keys.js'
import { postNewUser, settled, stallRequest, type Stalled } from '../helpers/stalled-request.js'
import { waitFor } from '../helpers/wait.js'

const MIB = 1_048_576
const db = await createTestDatabase(t)
const keyFile = await writeKeyFile(t, [
  { id: 'greedy', secret: 'ssk_greedy', scopes: ['keys:admin', 'users:write'], max_concurrent_requests: 4 },
  { id: 'other', secret: 'ssk_other', scopes: ['users:write'] },
])
// The defaults otherwise: 1 MiB bodies, 32 MiB in flight for the process, 4 MiB for a client.
const config = loadConfig({
  API_KEYS_FILE: keyFile,
  LOG_LEVEL: 'silent',
  REQUEST_TIMEOUT_MS: '120000',
  // The uploads are held until the test lets them go (the minimum upload rate is not what is tried here).
  REQUEST_BODY_MIN_BYTES_PER_SECOND: '0',
  LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0',
})
const app = await buildApp({ config, sql: db.sql, logger: false })
await app.listen({ port: 0, host: '127.0.0.1' })
t.teardown(() => app.close())
const { port } = app.server.address() as { port: number }
const base = `http://127.0.0.1:${port}`

const bytesInFlight = async () =>
  Number(/^http_request_body_bytes_in_flight (\d+)$/m.exec((await app.inject({ url: '/metrics' })).body)?.[1] ?? 0)
const stall = (secret: string) =>
  stallRequest(
    port,
    `POST /api/v1/user HTTP/1.1\r\nHost: x\r\nX-API-Key: ${secret}\r\nContent-Type: application/json\r\n` +
      `Idempotency-Key: ${randomUUID()}\r\nContent-Length: ${MIB}\r\n\r\n{"system_user_id":`,
  )

t.test("8 created keys' slow uploads are held to the partner's budget; another partner is served", async (t) => {
  const children: string[] = []
  for (let i = 0; i < 8; i++) {
    const res = await app.inject({
      method: 'POST',
      url: '/api/v1/admin/keys',
      headers: { 'x-api-key': 'ssk_greedy', 'idempotency-key': randomUUID() },
      payload: { id: `greedy-${i}`, scopes: ['users:write'] },
    })
    t.equal(res.statusCode, 201)
    children.push(res.json().secret)
  }

  const uploads: Stalled[] = []
  for (const secret of children) for (let i = 0; i < 4; i++) uploads.push(stall(secret))
  t.teardown(() => {
    for (const upload of uploads) upload.socket.destroy()
  })
  // The refused ones are answered and closed; the held ones stay open.
  const refused: { status: number; body: string }[] = []
  for (const upload of uploads) void upload.answered.then((answer) => refused.push(answer))
  await waitFor('28 uploads refused', () => refused.length >= 28)
  t.ok(
    refused.every(
      (a) => a.status === 429 && /SECURITY_(CONCURRENT_REQUESTS|BODY_BYTES_IN_FLIGHT)_EXCEEDED/.test(a.body),
    ),
    'each with 429 for what the partner holds',
  )
  t.equal(await settled(bytesInFlight, 4 * MIB), 4 * MIB, "the partner holds 4 MiB, not the process's 32")

  const statuses = await Promise.all(
    Array.from({ length: 20 }, () => postNewUser(base, 'ssk_other').then((r) => r.status)),
  )
  t.same(
    statuses.filter((s) => s < 200 || s > 299),
    [],
    `another partner: ${statuses.length} writes, 0 non-2xx`,
  )
  t.equal((await postNewUser(base, 'ssk_greedy')).status, 429, "the partner's root shares the same budget")
  t.equal(refused.length, 28, 'the 4 held uploads are still held')

  for (const upload of uploads) upload.socket.destroy()
  t.equal(await settled(bytesInFlight, 0), 0, 'every ending gives the bytes back')
  t.equal((await postNewUser(base, children[0]!)).status, 201, 'then a created key writes again')
})

// Every wait a request makes on the database is bounded, on real PostgreSQL: a request that
// cannot get a connection within DATABASE_CONNECTION_WAIT_MS answers 503 with Retry-After (and
// /metrics counts it by reason); exports hold at most their share of the pool, and one whose
// reader stops reading is cut and gives its connection back, so others' reads keep answering.
import t, { type Test } from 'tap'
import { randomUUID } from 'node:crypto'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { createTestDatabase } from '../helpers/database.js'
import { NO_LOAD_SHEDDING } from '../helpers/app.js'
import { waitFor, within } from '../helpers/wait.js'

const KEY = 'key-one'
const OTHER_KEY = 'key-two'

async function appOn(t: Test, env: Record<string, string>, max = 10) {
  const db = await createTestDatabase(t, { max })
  const config = loadConfig({
    API_KEYS: `${KEY},${OTHER_KEY}`,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_MAX: '100000',
    ...NO_LOAD_SHEDDING,
    ...env,
  })
  const app = await buildApp({ config, sql: db.sql, logger: false })
  t.teardown(() => app.close())
  return { app, db }
}

t.test('no connection within DATABASE_CONNECTION_WAIT_MS: 503 with Retry-After, counted by reason', async (t) => {
  const { app, db } = await appOn(t, { DATABASE_CONNECTION_WAIT_MS: '300', DATABASE_STATEMENT_TIMEOUT_MS: '500' }, 2)
  const owner = { system_uuid: randomUUID(), system_user_id: 'waiting' }
  const created = await app.inject({
    method: 'POST',
    url: '/api/v1/user',
    headers: { 'x-api-key': KEY, 'idempotency-key': randomUUID() },
    payload: { ...owner, full_name: 'W' },
  })
  t.equal(created.statusCode, 201)

  // Someone else holds every connection of the pool.
  const held = [await db.sql.reserve(), await db.sql.reserve()]
  t.teardown(() => {
    for (const c of held) c.release()
  })
  const started = performance.now()
  // An erasure is a transaction from its first statement: it waits for a connection of its own.
  const res = await within(
    'the erasure to answer',
    app.inject({ method: 'DELETE', url: `/api/v1/user/${owner.system_uuid}/waiting`, headers: { 'x-api-key': KEY } }),
    10_000,
  )
  const tookMs = performance.now() - started
  t.equal(res.statusCode, 503)
  t.equal(res.json().code, 'COMMON_503')
  t.ok(Number(res.headers['retry-after']) > 0, 'carries Retry-After')
  t.ok(tookMs < 300 + 1000, `answered within the connection wait plus a second (${Math.round(tookMs)} ms)`)

  // A note's create first reads on the pool, where the driver queues it: cut at the deadline.
  const write = await within(
    'the write to answer',
    app.inject({
      method: 'POST',
      url: '/api/v1/conspectuses',
      headers: { 'x-api-key': KEY, 'idempotency-key': randomUUID() },
      payload: { ...owner, title: 't', cue_sheet: {}, dense_paragraph: 'p', bullets: [] },
    }),
    10_000,
  )
  t.equal(write.statusCode, 503)
  t.ok(Number(write.headers['retry-after']) > 0)

  // A read sent on the pool waits in the driver's queue: it too is cut at the deadline.
  const read = await within(
    'the read to answer',
    app.inject({ method: 'GET', url: `/api/v1/user/${owner.system_uuid}/waiting`, headers: { 'x-api-key': KEY } }),
    10_000,
  )
  t.equal(read.statusCode, 503)

  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body
  t.match(metrics, /db_deadline_exceeded_total\{reason="connection_wait"\} [1-9]/)
  t.match(metrics, /db_deadline_exceeded_total\{reason="deadline"\} [1-9]/)

  for (const c of held.splice(0)) c.release()
  // The connections come back, and the service with them: the waits left nothing behind.
  await waitFor('the pool to serve again', async () => {
    const again = await app.inject({
      method: 'GET',
      url: `/api/v1/user/${owner.system_uuid}/waiting`,
      headers: { 'x-api-key': KEY },
    })
    return again.statusCode === 200
  })
  await waitFor('no connection left reserved', () => app.db.usage.reserved === 0)
})

t.test('12 exports nobody reads: another key reads within 1 s every time; the stalled exports are cut', async (t) => {
  const { app, db } = await appOn(t, { EXPORT_WRITE_TIMEOUT_MS: '4000', DATABASE_CONNECTION_WAIT_MS: '1000' })
  const owner = { system_uuid: randomUUID(), system_user_id: 'big' }
  const created = await app.inject({
    method: 'POST',
    url: '/api/v1/user',
    headers: { 'x-api-key': KEY, 'idempotency-key': randomUUID() },
    payload: { ...owner, full_name: 'Big' },
  })
  t.equal(created.statusCode, 201)
  const userId = created.json().client_uuid
  // About 24 MB of notes: far more than the socket buffers of a reader who never reads.
  await db.sql`
    insert into conspectuses (conspectus_uuid, user_id, title, cue_sheet, dense_paragraph, next_review_at, created_at, updated_at)
    select gen_random_uuid(), ${userId}, 'n', '{}'::jsonb, repeat('x', 20000), now(), now(), now()
    from generate_series(1, 1200)`
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo

  const stalled: net.Socket[] = []
  t.teardown(() => {
    for (const s of stalled) s.destroy()
  })
  for (let i = 0; i < 12; i++) {
    const socket = net.connect(port, '127.0.0.1')
    socket.on('error', () => {})
    socket.write(`GET /api/v1/user/${owner.system_uuid}/big/export HTTP/1.1\r\nhost: x\r\nx-api-key: ${KEY}\r\n\r\n`)
    socket.pause() // never reads
    stalled.push(socket)
  }
  await waitFor('exports to hold their share', () => app.db.usage.exports > 0)
  // The ten exports beyond the share wait DATABASE_CONNECTION_WAIT_MS for a slot, then answer 503;
  // by then the two with a connection have filled their readers' socket buffers and stalled.
  await waitFor(
    'the exports beyond the share to be refused',
    () => app.db.usage.deadlinesExceeded.connection_wait >= 10,
  )
  t.equal(app.db.usage.exports, 2, 'two exports hold a connection, stalled')

  const slowest: number[] = []
  for (let i = 0; i < 15; i++) {
    const started = performance.now()
    const res = await within(
      'a read while exports stall',
      fetch(`http://127.0.0.1:${port}/api/v1/user/${owner.system_uuid}/big`, { headers: { 'x-api-key': OTHER_KEY } }),
      10_000,
    )
    slowest.push(performance.now() - started)
    t.equal(res.status, 200)
    await res.arrayBuffer()
  }
  const worst = Math.max(...slowest)
  t.comment(`reads while 12 exports stall (ms): ${slowest.map(Math.round).join(' ')}`)
  t.ok(worst < 1000, `every read answered within 1 s (slowest ${Math.round(worst)} ms)`)
  t.ok(app.db.usage.exports <= 2, 'exports hold at most EXPORT_MAX_CONNECTIONS connections')

  // Nobody reads: each export is cut after its write timeout and gives its connection back.
  await waitFor('the stalled exports to be cut', () => app.db.usage.exports === 0 && app.db.usage.reserved === 0, {
    timeoutMs: 20_000,
  })
  const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body
  t.match(metrics, /db_pool_reserved_connections 0/)
})

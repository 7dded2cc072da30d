// The real process: SIGKILL under a stream of writes loses no acknowledged write and doubles
// none; SIGTERM drains in-flight requests, reports not_ready while draining and exits 0.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { createTestDatabase } from '../helpers/database.js'
import { startServer } from '../helpers/server-process.js'
import { waitFor } from '../helpers/wait.js'

const headers = (key: string) => ({ 'x-api-key': 'k', 'content-type': 'application/json', 'idempotency-key': key })

t.test('SIGKILL mid-stream: every acknowledged write is there once, retries complete the rest', async (t) => {
  const db = await createTestDatabase(t)
  const env = { DATABASE_URL: db.url }
  let server = await startServer(t, env)
  const requests = Array.from({ length: 400 }, (_, i) => ({
    key: `crash-${i}`,
    body: { system_user_id: `crash-${i}`, system_uuid: randomUUID(), full_name: `C${i}` },
  }))
  const acknowledged = new Set<number>()
  const unanswered = new Set<number>()
  let next = 0
  const worker = async () => {
    while (next < requests.length) {
      const i = next++
      try {
        const res = await fetch(`${server.base}/api/v1/user`, {
          method: 'POST',
          headers: headers(requests[i]!.key),
          body: JSON.stringify(requests[i]!.body),
        })
        if (res.status === 201) acknowledged.add(i)
        else unanswered.add(i)
        await res.arrayBuffer()
      } catch {
        unanswered.add(i)
      }
    }
  }
  const stream = Promise.all(Array.from({ length: 8 }, worker))
  while (acknowledged.size < 60) await sleep(5)
  server.child.kill('SIGKILL')
  await stream
  t.ok(
    acknowledged.size >= 60 && unanswered.size > 0,
    `${acknowledged.size} acknowledged, ${unanswered.size} unanswered at the kill`,
  )

  server = await startServer(t, env)
  let replayed = 0
  for (const i of unanswered) {
    const res = await fetch(`${server.base}/api/v1/user`, {
      method: 'POST',
      headers: headers(requests[i]!.key),
      body: JSON.stringify(requests[i]!.body),
    })
    t.equal(res.status, 201, `retry ${i}`)
    if (res.headers.get('idempotent-replayed') === 'true') replayed++
    await res.arrayBuffer()
  }
  t.comment(`${replayed} retries were replays of writes committed before the kill`)
  const rows = await db.sql<{ system_user_id: string; n: number }[]>`
    select system_user_id, count(*)::int as n from users where system_user_id like 'crash-%' group by system_user_id`
  t.equal(rows.length, requests.length, 'every request applied')
  t.ok(
    rows.every((r) => r.n === 1),
    'none doubled',
  )
  server.child.kill('SIGKILL')
})

t.test('SIGTERM: not_ready while draining, in-flight requests finish, exit code 0', async (t) => {
  const db = await createTestDatabase(t)
  const server = await startServer(t, { DATABASE_URL: db.url, SHUTDOWN_DRAIN_MS: '1500' })
  // Hold a lock so that one write is in flight when the signal arrives.
  const blocker = postgres(db.url, { max: 1, onnotice: () => {} })
  t.teardown(() => blocker.end())
  const reserved = await blocker.reserve()
  await reserved`begin`
  await reserved`lock table users in exclusive mode`
  const inFlight = fetch(`${server.base}/api/v1/user`, {
    method: 'POST',
    headers: headers('term-1'),
    body: JSON.stringify({ system_user_id: 'term', system_uuid: randomUUID(), full_name: 'T' }),
  })
  await waitFor('the write to wait for the users lock', async () => {
    const waiting = await db.sql`select 1 from pg_locks where relation = 'users'::regclass and not granted`
    return waiting.length > 0
  })
  server.child.kill('SIGTERM')
  const ready = await waitFor('readiness to drop while draining', async () => {
    const res = await fetch(`${server.base}/ready`)
    if (res.status === 503) return res
    await res.body?.cancel()
    return false
  })
  t.equal(ready.status, 503, 'readiness drops while draining')
  t.match(await ready.json(), { status: 'not_ready', checks: { shutdown: 'draining' } })
  await reserved`commit`
  reserved.release()
  const res = await inFlight
  t.equal(res.status, 201, 'the in-flight write completed')
  const code = await server.exited
  t.equal(code, 0, 'clean exit')
  t.notMatch(server.output(), /error/i)
})

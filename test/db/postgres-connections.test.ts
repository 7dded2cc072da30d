// What the service relies on from postgres.js when connections fail: a lost connection settles
// its queries (never throws from a timer, never leaves a caller waiting, never goes back to the
// pool), a multi-host connection tries each host once per attempt and then fails instead of
// cycling through them forever, and `target_session_attrs=primary` never lands on a hot standby.
// postgres.js 3.4.9 needed a patch for each; 4.x does all of it as published. (4.x still lets
// `read-write` connect to a hot standby: it judges it by default_transaction_read_only alone,
// which a standby reports off. So the service and its documents use `primary`.)
import t from 'tap'
import { connect, createServer } from 'node:net'
import postgres from 'postgres'
import { ADMIN_URL } from '../helpers/database.js'
import { startPrimaryAndStandby } from '../helpers/private-replication.js'
import { freePort } from '../helpers/server-process.js'

/** Settles within `ms`, or says it did not: a hang is a failure, not a stuck test. */
function outcome(p: Promise<unknown>, ms: number): Promise<string> {
  let timer: NodeJS.Timeout | undefined
  return Promise.race([
    p.then(
      () => 'resolved',
      (e: { code?: string }) => `rejected ${e.code}`,
    ),
    new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve(`still pending after ${ms} ms`), ms)
    }),
  ]).finally(() => clearTimeout(timer))
}

// A primary and its hot standby, for target_session_attrs (the standby is listed first).
const replication = await startPrimaryAndStandby(t, [await freePort(), await freePort()])
const bothHosts = `postgres://postgres@127.0.0.1:${replication.standby.port},127.0.0.1:${replication.primary.port}/postgres`

t.test('queries on a connection whose backend died are rejected, not thrown', async (t) => {
  const killer = postgres(ADMIN_URL, { max: 1 })
  t.teardown(() => killer.end({ timeout: 1 }))
  for (let round = 0; round < 3; round++) {
    const sql = postgres(ADMIN_URL, { max: 2, onnotice: () => {} })
    const reserved = await sql.reserve()
    const [row] = await reserved`select pg_backend_pid() as pid`
    await killer`select pg_terminate_backend(${row!.pid})`
    // The first query meets the dying backend (its 57P01, or the closed socket, by timing);
    // the next ones run on a connection whose socket is gone.
    t.match(await outcome(reserved`select 1`, 5000), /^rejected (57P01|CONNECTION_CLOSED|ECONNRESET)$/)
    t.equal(await outcome(reserved`select 1`, 5000), 'rejected CONNECTION_CLOSED', `round ${round}: settled`)
    t.equal(await outcome(reserved`select 2`, 5000), 'rejected CONNECTION_CLOSED', `round ${round}: again`)
    // Released after its close, it must not go back to the pool as an open connection.
    reserved.release()
    t.same(await sql`select 1 as one`, [{ one: 1 }], `round ${round}: the pool still serves`)
    await sql.end({ timeout: 1 })
  }
})

t.test('with several hosts and none reachable, a query fails after one try each', async (t) => {
  const [a, b] = [await freePort(), await freePort()]
  const sql = postgres(`postgres://postgres@127.0.0.1:${a},127.0.0.1:${b}/postgres`, {
    max: 1,
    target_session_attrs: 'primary',
    connect_timeout: 2,
  })
  t.teardown(() => sql.end({ timeout: 1 }))
  t.equal(await outcome(sql`select 1`, 5000), 'rejected ECONNREFUSED')
  t.equal(await outcome(sql`select 1`, 5000), 'rejected ECONNREFUSED', 'and again on the next query')
})

t.test('after every host failed, the next query tries every host again', async (t) => {
  const url = new URL(ADMIN_URL)
  const [down, later] = [await freePort(), await freePort()]
  const sql = postgres(
    `postgres://${url.username}${url.password ? `:${url.password}` : ''}@127.0.0.1:${down},127.0.0.1:${later}${url.pathname}`,
    { max: 1, connect_timeout: 2 },
  )
  t.teardown(() => sql.end({ timeout: 1 }))
  t.equal(await outcome(sql`select 1`, 5000), 'rejected ECONNREFUSED')
  // The second host comes up (a proxy to the shared server); the first stays down.
  const proxy = createServer((client) => {
    const server = connect(Number(url.port || 5432), url.hostname)
    client.on('error', () => server.destroy())
    server.on('error', () => client.destroy())
    client.pipe(server).pipe(client)
  })
  await new Promise<void>((resolve) => proxy.listen(later, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => proxy.close(resolve)))
  t.same(await sql`select 1 as one`, [{ one: 1 }])
  await sql.end({ timeout: 1 })
})

t.test('with several hosts, an unreachable one is skipped', async (t) => {
  const url = new URL(ADMIN_URL)
  const sql = postgres(
    `postgres://${url.username}${url.password ? `:${url.password}` : ''}@127.0.0.1:${await freePort()},${url.host}${url.pathname}?target_session_attrs=primary`,
    { max: 2, connect_timeout: 2 },
  )
  t.teardown(() => sql.end({ timeout: 1 }))
  for (let i = 0; i < 4; i++) t.same(await sql`select ${i}::int as i`, [{ i }])
})

t.test('target_session_attrs=primary never connects to a hot standby listed first', async (t) => {
  // `standby` shows that the first host is the standby and answers.
  for (const [attrs, recovering] of [
    ['primary', false],
    ['standby', true],
  ] as const) {
    // A fresh pool each time, so every connection starts from the standby, the first host.
    for (let i = 0; i < 3; i++) {
      const sql = postgres(`${bothHosts}?target_session_attrs=${attrs}`, { max: 1, onnotice: () => {} })
      const [row] = await sql<{ recovering: boolean }[]>`select pg_is_in_recovery() as recovering`
      t.equal(row?.recovering, recovering, `${attrs}: ${recovering ? 'the standby' : 'the primary'}`)
      await sql.end({ timeout: 1 })
    }
  }
})

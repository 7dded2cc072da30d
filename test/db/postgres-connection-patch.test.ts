// patches/postgres+3.4.9.patch, src/connection.js and src/index.js: a lost connection must
// settle its queries (never throw from a timer, never leave a caller waiting, never go back to
// the pool), a multi-host connection must try each host once per attempt and then fail, not
// cycle through them forever, and read-write must never land on a hot standby. The ESM build
// (src/) is the one the service loads and the one patched. patches/README.md says which case fails without
// which change; unpatched, the first ends the process on an uncaught
// `TypeError: Cannot read properties of null (reading 'write')`.
import t from 'tap'
import { connect, createServer } from 'node:net'
import path from 'node:path'
import { projectRoot } from '../../src/paths.js'
import { ADMIN_URL } from '../helpers/database.js'
import { startPrimaryAndStandby } from '../helpers/private-replication.js'
import { freePort } from '../helpers/server-process.js'

type Postgres = typeof import('postgres')

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

for (const build of ['src']) {
  const load = async (): Promise<Postgres> =>
    (await import(path.join(projectRoot, 'node_modules/postgres/src/index.js'))).default

  t.test(`${build}: queries on a connection whose backend died are rejected, not thrown`, async (t) => {
    const postgres = await load()
    const killer = postgres(ADMIN_URL, { max: 1 })
    t.teardown(() => killer.end({ timeout: 1 }))
    for (let round = 0; round < 3; round++) {
      const sql = postgres(ADMIN_URL, { max: 2, onnotice: () => {} })
      const reserved = await sql.reserve()
      const [row] = await reserved`select pg_backend_pid() as pid`
      await killer`select pg_terminate_backend(${row!.pid})`
      // The first query meets the dying socket (CONNECTION_CLOSED or ECONNRESET, by timing);
      // the next ones run on a connection whose socket is gone.
      t.match(await outcome(reserved`select 1`, 5000), /^rejected (CONNECTION_CLOSED|ECONNRESET)$/)
      t.equal(await outcome(reserved`select 1`, 5000), 'rejected CONNECTION_CLOSED', `round ${round}: settled`)
      t.equal(await outcome(reserved`select 2`, 5000), 'rejected CONNECTION_CLOSED', `round ${round}: again`)
      // Released after its close, it must not go back to the pool as an open connection.
      reserved.release()
      t.same(await sql`select 1 as one`, [{ one: 1 }], `round ${round}: the pool still serves`)
      await sql.end({ timeout: 1 })
    }
  })

  t.test(`${build}: with several hosts and none reachable, a query fails after one try each`, async (t) => {
    const postgres = await load()
    const [a, b] = [await freePort(), await freePort()]
    const sql = postgres(`postgres://postgres@127.0.0.1:${a},127.0.0.1:${b}/postgres`, {
      max: 1,
      target_session_attrs: 'read-write',
      connect_timeout: 2,
    })
    t.teardown(() => sql.end({ timeout: 1 }))
    t.equal(await outcome(sql`select 1`, 5000), 'rejected ECONNREFUSED')
    t.equal(await outcome(sql`select 1`, 5000), 'rejected ECONNREFUSED', 'and again on the next query')
  })

  t.test(`${build}: after every host failed, the next query tries every host again`, async (t) => {
    const postgres = await load()
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

  t.test(`${build}: with several hosts, an unreachable one is skipped`, async (t) => {
    const postgres = await load()
    const url = new URL(ADMIN_URL)
    const sql = postgres(
      `postgres://${url.username}${url.password ? `:${url.password}` : ''}@127.0.0.1:${await freePort()},${url.host}${url.pathname}?target_session_attrs=read-write`,
      { max: 2, connect_timeout: 2 },
    )
    t.teardown(() => sql.end({ timeout: 1 }))
    for (let i = 0; i < 4; i++) t.same(await sql`select ${i}::int as i`, [{ i }])
  })
}

for (const build of ['src']) {
  t.test(`${build}: target_session_attrs=read-write never connects to a hot standby`, async (t) => {
    const postgres: Postgres = (await import(path.join(projectRoot, 'node_modules/postgres/src/index.js'))).default
    // `standby` (unpatched too) shows that the first host is the standby and answers.
    for (const [attrs, recovering] of [
      ['read-write', false],
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
}

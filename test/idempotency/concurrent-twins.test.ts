// Two requests with one Idempotency-Key at once, and a key whose record is busy elsewhere. The
// order of events is forced with row locks held from a connection of the test's own: each step
// waits until PostgreSQL shows the request blocked by that connection (pg_blocking_pids), never
// on a sleep.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import type { Test } from 'tap'
import type { ReservedSql } from 'postgres'
import { buildTestApp, newKey, type TestApi } from '../helpers/app.js'
import { waitFor, within } from '../helpers/wait.js'

const userBody = () => ({
  system_user_id: `twin-${randomUUID().slice(0, 8)}`,
  system_uuid: randomUUID(),
  full_name: 'Twin',
})

/** A connection of the test's own, in an open transaction; ended with the test. */
async function holder(t: Test, api: TestApi): Promise<{ sql: ReservedSql; pid: number }> {
  const sql = await api.db.sql.reserve()
  t.teardown(() => sql.release())
  const [{ pid }] = (await sql`select pg_backend_pid() as pid`) as unknown as [{ pid: number }]
  await sql`begin`
  return { sql, pid }
}

/** The statements of backends that wait for `pid`'s locks, once there are `count` of them. */
const blockedBy = (api: TestApi, pid: number, count: number) =>
  waitFor(`${count} statement(s) waiting for backend ${pid}`, async () => {
    const rows = await api.db.sql<{ query: string }[]>`
      select query from pg_stat_activity where ${pid}::int = any(pg_blocking_pids(pid))`
    return rows.length === count && rows.map((r) => r.query)
  })

/** Once both twins wait for the holder's locks, the holder rolls back; the twins' answers. */
async function releaseTwins<T>(api: TestApi, lock: { sql: ReservedSql; pid: number }, twins: Promise<T>[]) {
  await blockedBy(api, lock.pid, 2)
  await lock.sql`rollback`
  return within('both twins answer', Promise.all(twins))
}

t.test('twins that meet on the user they create: one writes, the other replays its answer', async (t) => {
  const api = await buildTestApp(t)
  const body = userBody()
  const key = newKey()
  // An uncommitted user with the same natural key holds both twins at their insert.
  const lock = await holder(t, api)
  await lock.sql`insert into users (system_user_id, system_uuid, full_name)
    values (${body.system_user_id}, ${body.system_uuid}, 'Holder')`
  const twins = [api.post('/api/v1/user', body, key), api.post('/api/v1/user', body, key)]
  // Released: one twin inserts the user, the other waits for it, then meets its user row (a
  // conflict) and must answer with the first twin's stored answer instead.
  const answers = await releaseTwins(api, lock, twins)

  t.same(
    answers.map((a) => a.statusCode),
    [201, 201],
    'both 201',
  )
  t.equal(answers[0]!.body, answers[1]!.body, 'the same answer, byte for byte')
  t.same(answers.map((a) => a.headers['idempotent-replayed'] ?? 'written').sort(), ['true', 'written'])
  const [users] = await api.db.sql`select count(*)::int as n from users where system_user_id = ${body.system_user_id}`
  t.equal(users!.n, 1, 'one user')
})

t.test('twins that meet on the stored answer: the later one replays the first', async (t) => {
  const api = await buildTestApp(t)
  const owner = userBody()
  t.equal((await api.post('/api/v1/user', owner)).statusCode, 201)
  const log = { system_user_id: owner.system_user_id, system_uuid: owner.system_uuid, message: 'Twin log' }
  const key = newKey()
  // The owner's row locked for update holds both twins at their error log's foreign key check,
  // after their lookups found no answer; released, both write and meet on the answer's record.
  const lock = await holder(t, api)
  await lock.sql`select 1 from users where system_user_id = ${owner.system_user_id} for update`
  const twins = [api.post('/api/v1/errors', log, key), api.post('/api/v1/errors', log, key)]
  const answers = await releaseTwins(api, lock, twins)

  t.same(
    answers.map((a) => a.statusCode),
    [201, 201],
  )
  t.equal(answers[0]!.body, answers[1]!.body, 'one error log in both answers')
  t.same(answers.map((a) => a.headers['idempotent-replayed'] ?? 'written').sort(), ['true', 'written'])
  const [logs] = await api.db.sql`select count(*)::int as n from error_logs`
  t.equal(logs!.n, 1, 'the later twin rolled its own log back')
})

t.test('a record held elsewhere while it is being removed: 409 in progress, then the retry writes', async (t) => {
  const api = await buildTestApp(t)
  const key = newKey()
  t.equal((await api.post('/api/v1/user', userBody(), key)).statusCode, 201)
  await api.db
    .sql`update idempotency_records set expires_at = now() - interval '1 second' where idempotency_key = ${key}`
  // Another session (the purge, say) has the expired record locked and is about to remove it.
  const lock = await holder(t, api)
  await lock.sql`select 1 from idempotency_records where idempotency_key = ${key} for update`
  const body = userBody()
  const request = api.post('/api/v1/user', body, key)
  // The write failed on the expired record; its removal of that record waits for the lock.
  const [waiting] = await blockedBy(api, lock.pid, 1)
  t.match(waiting, /delete from idempotency_records/, 'the request waits to remove the expired record')
  await lock.sql`delete from idempotency_records where idempotency_key = ${key}`
  await lock.sql`commit`

  // This request removed nothing, so it cannot tell whether a twin holds the key now.
  const res = await within('the answer', request)
  t.equal(res.statusCode, 409)
  t.equal(res.json().code, 'COMMON_409')
  t.equal(res.json().key, 'IDEMPOTENCY_REQUEST_IN_PROGRESS')
  const [users] = await api.db.sql`select count(*)::int as n from users where system_user_id = ${body.system_user_id}`
  t.equal(users!.n, 0, 'its write rolled back')

  const retry = await api.post('/api/v1/user', body, key)
  t.equal(retry.statusCode, 201, 'the key is free: the retry writes')
  t.notOk(retry.headers['idempotent-replayed'])
})

t.test('a second attempt that meets an answer expired while it waited: 409 in progress, not a third', async (t) => {
  const api = await buildTestApp(t)
  const key = newKey()
  const body = userBody()
  t.equal((await api.post('/api/v1/user', body, key)).statusCode, 201)
  await api.db.sql`delete from users where system_user_id = ${body.system_user_id}`
  const [record] = await api.db.sql`
    update idempotency_records set expires_at = now() - interval '1 second' where idempotency_key = ${key}
    returning key_id, scope, idempotency_key, request_hash, status_code, response_body, expires_at`
  // First attempt: the write meets the expired record, whose removal waits for this lock.
  const recordLock = await holder(t, api)
  await recordLock.sql`select 1 from idempotency_records where idempotency_key = ${key} for update`
  const request = api.post('/api/v1/user', body, key)
  t.match((await blockedBy(api, recordLock.pid, 1))[0], /delete from idempotency_records/)
  // Meanwhile an uncommitted user with the same natural key will hold the second attempt.
  const userLock = await holder(t, api)
  await userLock.sql`insert into users (system_user_id, system_uuid, full_name)
    values (${body.system_user_id}, ${body.system_uuid}, 'Holder')`
  await recordLock.sql`commit`
  t.match((await blockedBy(api, userLock.pid, 1))[0], /insert into users/, 'the second attempt waits')
  // What the second attempt waited for ends as an answer for the key that has expired already.
  await userLock.sql`delete from users where system_user_id = ${body.system_user_id}`
  await userLock.sql`insert into idempotency_records ${userLock.sql(record!)}`
  await userLock.sql`commit`

  const res = await within('the answer', request)
  t.equal(res.statusCode, 409)
  t.equal(res.json().key, 'IDEMPOTENCY_REQUEST_IN_PROGRESS')
  const [users] = await api.db.sql`select count(*)::int as n from users where system_user_id = ${body.system_user_id}`
  t.equal(users!.n, 0, 'no third attempt wrote the user')
})

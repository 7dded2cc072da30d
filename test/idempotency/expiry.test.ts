// A stored answer lives IDEMPOTENCY_TTL_HOURS: until then the key replays (or is 409), after it
// the key is free again (the write runs anew and its answer replaces the expired record), and the
// purge removes expired records only, in batches.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { purgeExpired } from '../../src/idempotency/records.js'
import { buildTestApp, newKey } from '../helpers/app.js'

const userBody = () => ({
  system_user_id: `x-${randomUUID().slice(0, 8)}`,
  system_uuid: randomUUID(),
  full_name: 'Expiry',
})

t.test('a record keeps its answer for the configured hours', async (t) => {
  const api = await buildTestApp(t, { IDEMPOTENCY_TTL_HOURS: '5' })
  const key = newKey()
  t.equal((await api.post('/api/v1/user', userBody(), key)).statusCode, 201)
  const [row] = await api.db.sql<{ hours: number }[]>`
    select extract(epoch from (expires_at - now())) / 3600 as hours from idempotency_records where idempotency_key = ${key}`
  t.ok(row!.hours > 4.9 && row!.hours <= 5, `expires in ${row!.hours} h`)
})

t.test('an expired answer is neither replayed nor a 409: the write runs again under the key', async (t) => {
  const api = await buildTestApp(t)
  const key = newKey()
  const body = userBody()
  const first = await api.post('/api/v1/user', body, key)
  t.equal(first.statusCode, 201)
  await api.db
    .sql`update idempotency_records set expires_at = now() - interval '1 second' where idempotency_key = ${key}`

  const other = userBody()
  const again = await api.post('/api/v1/user', other, key)
  t.equal(again.statusCode, 201, 'another body under the expired key: written, not 409')
  t.notOk(again.headers['idempotent-replayed'])
  t.equal(again.json().system_user_id, other.system_user_id)
  const records = await api.db.sql<{ n: number; live: boolean; body: string }[]>`
    select count(*) over ()::int as n, expires_at > now() as live, response_body as body
    from idempotency_records where idempotency_key = ${key}`
  t.equal(records.length, 1, 'one record for the key: the expired one was replaced')
  t.ok(records[0]!.live, 'the new record has not expired')
  t.equal(records[0]!.body, again.body, 'it holds the new answer')
  const replay = await api.post('/api/v1/user', other, key)
  t.equal(replay.headers['idempotent-replayed'], 'true', 'the new answer replays')
  t.equal(replay.headers['content-type'], 'application/json; charset=utf-8', 'as JSON, like the first answer')
  t.equal(replay.body, again.body)
})

t.test('an expired answer for a learner write: the write runs again', async (t) => {
  const api = await buildTestApp(t)
  const owner = userBody()
  t.equal((await api.post('/api/v1/user', owner)).statusCode, 201)
  const key = newKey()
  const log = { system_user_id: owner.system_user_id, system_uuid: owner.system_uuid, message: 'Mixed up ATP' }
  const first = await api.post('/api/v1/errors', log, key)
  t.equal(first.statusCode, 201)
  await api.db
    .sql`update idempotency_records set expires_at = now() - interval '1 second' where idempotency_key = ${key}`
  const again = await api.post('/api/v1/errors', log, key)
  t.equal(again.statusCode, 201)
  t.notOk(again.headers['idempotent-replayed'])
  t.not(again.json().error_log_uuid, first.json().error_log_uuid, 'a second error log')
  const [logs] = await api.db.sql`select count(*)::int as n from error_logs`
  t.equal(logs!.n, 2, 'two rows')
})

t.test('the purge removes expired records only, at most the batch it is given', async (t) => {
  const api = await buildTestApp(t)
  const keys = Array.from({ length: 5 }, () => newKey())
  for (const key of keys) t.equal((await api.post('/api/v1/user', userBody(), key)).statusCode, 201)
  await api.db
    .sql`update idempotency_records set expires_at = now() - interval '1 minute' where idempotency_key in ${api.db.sql(keys.slice(0, 3))}`
  t.equal(await purgeExpired(api.db.sql, 2), 2, 'a batch of two')
  t.equal(await purgeExpired(api.db.sql, 2), 1, 'the last expired one')
  t.equal(await purgeExpired(api.db.sql), 0, 'nothing expired is left')
  const left = await api.db.sql<{ idempotency_key: string }[]>`
    select idempotency_key from idempotency_records where idempotency_key in ${api.db.sql(keys)} order by 1`
  t.same(
    left.map((r) => r.idempotency_key),
    keys.slice(3).sort(),
    'the live records stay',
  )
})

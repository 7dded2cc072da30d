// Only a unique violation of the record's own key (idempotency_records_pkey) means that a twin
// holds the Idempotency-Key. Any other error of a write, a unique violation of another constraint
// included, is that write's own failure: it is passed on, never answered as "still in progress"
// (a 409 that tells the client to retry the same key later).
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { isKeyTaken } from '../../src/idempotency/records.js'
import { buildTestApp } from '../helpers/app.js'

const api = await buildTestApp(t)

async function createUser(fullName: string) {
  const body = { system_user_id: `u-${randomUUID().slice(0, 8)}`, system_uuid: randomUUID(), full_name: fullName }
  const res = await api.post('/api/v1/user', body)
  if (res.statusCode !== 201) throw new Error(res.body)
  return `/api/v1/user/${body.system_uuid}/${body.system_user_id}`
}

t.test('a write that breaks another unique constraint fails as itself, not as a key in progress', async (t) => {
  // A unique constraint made for this test: the schema has none a write of a user can break
  // other than the natural key, which the users repository answers itself.
  await api.db.sql`create unique index users_full_name_test on users (full_name)`
  t.teardown(() => api.db.sql`drop index if exists users_full_name_test`)
  await createUser('Ada Lovelace')
  const url = await createUser('Grace Hopper')

  const res = await api.patch(url, { full_name: 'Ada Lovelace' })
  t.equal(res.statusCode, 500)
  t.equal(res.json().code, 'COMMON_500')
  t.notMatch(res.body, /users_full_name_test|duplicate key/, 'nothing of the database error leaves')
  const [records] = await api.db.sql`select count(*)::int as n from idempotency_records where scope like 'PATCH %'`
  t.equal(records!.n, 0, 'no answer stored for the failed write')
})

t.test("isKeyTaken: true for the record key's violation only", async (t) => {
  const insert = (key: string) => api.db.sql`
    insert into idempotency_records (key_id, scope, idempotency_key, request_hash, status_code, response_body, expires_at)
    values ('k', '/s', ${key}, 'h', 201, '{}', now() + interval '1 hour')`
  await insert('taken-once')
  const taken = await insert('taken-once').catch((err: unknown) => err)
  t.match(taken, { code: '23505', constraint_name: 'idempotency_records_pkey' })
  t.equal(isKeyTaken(taken), true)

  await api.db.sql`create unique index idempotency_records_hash_test on idempotency_records (request_hash)`
  t.teardown(() => api.db.sql`drop index if exists idempotency_records_hash_test`)
  const other = await insert('another-key').catch((err: unknown) => err)
  t.match(other, { code: '23505', constraint_name: 'idempotency_records_hash_test' })
  t.equal(isKeyTaken(other), false, 'a unique violation of another constraint, even on the same table')

  const notUnique = await api.db.sql`select 1/0`.catch((err: unknown) => err)
  t.match(notUnique, { code: '22012' })
  t.equal(isKeyTaken(notUnique), false)
  // JavaScript can throw anything: a thrown nullish value is not a key conflict either.
  for (const thrown of [undefined, null, 'idempotency_records_pkey']) t.equal(isKeyTaken(thrown), false, String(thrown))
})

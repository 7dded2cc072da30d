// PUT replaces, PATCH merges, both can move the user to another system_uuid.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { purgeExpired } from '../../src/idempotency/records.js'
import { buildTestApp, newKey } from '../helpers/app.js'

const api = await buildTestApp(t)

async function createUser(extra: Record<string, unknown> = {}) {
  const body = {
    system_user_id: `p-${randomUUID().slice(0, 8)}`,
    system_uuid: randomUUID(),
    full_name: 'Grace Hopper',
    username: 'grace',
    timezone: 'America/New_York',
    is_row_invalid: 1,
    invalidation_reason_uuid: randomUUID(),
    ...extra,
  }
  const res = await api.post('/api/v1/user', body)
  if (res.statusCode !== 201) throw new Error(res.body)
  return { body, user: res.json(), url: `/api/v1/user/${body.system_uuid}/${body.system_user_id}` }
}

t.test('PUT replaces every mutable field: omitted ones become null or 0', async (t) => {
  const { url, user, body } = await createUser()
  const res = await api.put(url, { full_name: 'Rear Admiral Hopper', timezone: 'Europe/Berlin' })
  t.equal(res.statusCode, 200)
  const updated = res.json()
  t.match(updated, {
    client_uuid: user.client_uuid,
    full_name: 'Rear Admiral Hopper',
    timezone: 'Europe/Berlin',
    username: null,
    is_row_invalid: 0,
    invalidation_reason_uuid: null,
    system_uuid: body.system_uuid,
    created_at: user.created_at,
  })
  t.ok(updated.updated_at > user.updated_at, 'updated_at moves forward')
  t.same((await api.get(url)).json(), updated)
})

t.test('PUT with system_uuid moves the user to the new key; null clears it', async (t) => {
  const { url, body } = await createUser()
  const target = randomUUID()
  const moved = await api.put(url, { full_name: 'Moved', timezone: 'UTC', system_uuid: target })
  t.equal(moved.statusCode, 200)
  t.equal(moved.json().system_uuid, target)
  t.equal((await api.get(url)).statusCode, 404)
  const newUrl = `/api/v1/user/${target}/${body.system_user_id}`
  t.equal((await api.get(newUrl)).json().full_name, 'Moved')
  const cleared = await api.put(newUrl, { full_name: 'Cleared', timezone: 'UTC', system_uuid: null })
  t.equal(cleared.json().system_uuid, null)
  t.equal((await api.get(newUrl)).statusCode, 404)
})

t.test('moving onto a key another user holds is 409 USER_409 and changes nothing', async (t) => {
  const a = await createUser()
  const b = await createUser({ system_user_id: a.body.system_user_id })
  const res = await api.put(b.url, { full_name: 'Clash', timezone: 'UTC', system_uuid: a.body.system_uuid })
  t.equal(res.statusCode, 409)
  t.same(res.json(), {
    code: 'USER_409',
    key: 'USER_SYSTEM_KEY_CONFLICT',
    message: 'Another user already holds this system_user_id and system_uuid.',
    source: 'business',
  })
  t.equal((await api.get(b.url)).json().full_name, 'Grace Hopper')
  const patch = await api.patch(b.url, { system_uuid: a.body.system_uuid })
  t.equal(patch.statusCode, 409)
  t.equal(patch.json().code, 'USER_409')
})

t.test('PUT, PATCH and GET on an unknown key are 404 USER_404', async (t) => {
  const url = `/api/v1/user/${randomUUID()}/ghost`
  for (const res of [
    await api.get(url),
    await api.put(url, { full_name: 'X', timezone: 'UTC' }),
    await api.patch(url, { full_name: 'X' }),
  ]) {
    t.equal(res.statusCode, 404)
    t.match(res.json(), { code: 'USER_404', key: 'USER_NOT_FOUND', source: 'business' })
  }
})

t.test('PATCH applies only present fields and null clears nullable ones', async (t) => {
  const { url, user } = await createUser()
  const res = await api.patch(url, { username: null, timezone: 'Asia/Tokyo' })
  t.equal(res.statusCode, 200)
  t.match(res.json(), { ...user, username: null, timezone: 'Asia/Tokyo', updated_at: String })
  const again = await api.patch(url, { invalidation_reason_uuid: null, is_row_invalid: 0 })
  t.match(again.json(), {
    invalidation_reason_uuid: null,
    is_row_invalid: 0,
    full_name: 'Grace Hopper',
    timezone: 'Asia/Tokyo',
  })
})

t.test('PATCH null on a non-nullable field counts as not sent', async (t) => {
  const { url } = await createUser()
  const empty = await api.patch(url, { full_name: null })
  t.equal(empty.statusCode, 400)
  t.same(empty.json(), {
    code: 'USER_102',
    key: 'USER_PATCH_BODY_EMPTY',
    message: 'The patch contains no field to apply.',
    source: 'business',
  })
  t.equal((await api.patch(url, {})).json().code, 'USER_102')
  const mixed = await api.patch(url, { full_name: null, timezone: null, is_row_invalid: null, username: 'g' })
  t.match(mixed.json(), { full_name: 'Grace Hopper', timezone: 'America/New_York', is_row_invalid: 1, username: 'g' })
})

t.test('PUT and PATCH on one URL have separate idempotency scopes', async (t) => {
  const { url } = await createUser()
  const key = newKey()
  t.equal((await api.put(url, { full_name: 'Via PUT', timezone: 'UTC' }, key)).statusCode, 200)
  const patch = await api.patch(url, { full_name: 'Via PATCH' }, key)
  t.equal(patch.statusCode, 200, 'the PATCH scope does not see the PUT record')
  t.equal(patch.headers['idempotent-replayed'], undefined)
  const replay = await api.put(url, { timezone: 'UTC', full_name: 'Via PUT' }, key)
  t.equal(replay.headers['idempotent-replayed'], 'true')
  t.equal(replay.json().full_name, 'Via PUT', 'a replay returns the stored answer, not the current row')
})

t.test('PATCH hashes exactly the fields sent, explicit nulls included', async (t) => {
  const { url } = await createUser()
  const key = newKey()
  t.equal((await api.patch(url, { username: 'x' }, key)).statusCode, 200)
  const conflict = await api.patch(url, { username: 'x', invalidation_reason_uuid: null }, key)
  t.equal(conflict.statusCode, 409)
  t.equal(conflict.json().key, 'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD')
})

t.test('expired idempotency records are ignored, taken over and purged', async (t) => {
  const { url } = await createUser()
  const key = newKey()
  t.equal((await api.patch(url, { username: 'first' }, key)).statusCode, 200)
  await api.db
    .sql`update idempotency_records set expires_at = now() - interval '1 second' where idempotency_key = ${key}`
  const fresh = await api.patch(url, { username: 'second' }, key)
  t.equal(fresh.statusCode, 200, 'a different body with an expired key is a new write, not a 409')
  t.equal(fresh.json().username, 'second')
  t.equal(fresh.headers['idempotent-replayed'], undefined)
  const again = await api.patch(url, { username: 'second' }, key)
  t.equal(
    again.headers['idempotent-replayed'],
    'true',
    'the new write stored its own answer in place of the expired one',
  )
  t.equal(again.body, fresh.body)

  const other = newKey()
  await api.patch(url, { username: 'third' }, other)
  await api.db
    .sql`update idempotency_records set expires_at = now() - interval '1 second' where idempotency_key = ${other}`
  const purged = await purgeExpired(api.db.sql)
  t.ok(purged >= 1)
  const [left] = await api.db.sql`select count(*)::int as n from idempotency_records where idempotency_key = ${other}`
  t.equal(left!.n, 0)
})

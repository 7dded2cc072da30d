// A rolling upgrade from the previous release (95939b4): while its replicas still run, both
// versions share idempotency_records. This release adds no migration for it and reads and writes
// the same rows: a record the previous release stored replays here byte for byte, and the
// previous release's own statements (copied below as it sent them) still work on what this one
// stored. Records from before key ids (migration 0009, key_id '') expired a day after they were
// written: nothing reads them any more.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { legacyKeyId } from '../../src/auth/api-keys.js'
import { API_KEY, buildTestApp, newKey } from '../helpers/app.js'

// One fixed body (each test has a database of its own) and the request hash the previous release
// stored for it, written out rather than computed by this release's code: a change to the hash
// would otherwise agree with itself. The previous release's request-hash.ts: SHA-256 over
// {"full_name":"Rolling Upgrade","system_user_id":"r-fixed-01","system_uuid":"5f0c8a4e-..."}.
const userBody = () => ({
  system_user_id: 'r-fixed-01',
  system_uuid: '5f0c8a4e-2b7d-4c1e-9a3f-6d2e8b1c4a70',
  full_name: 'Rolling Upgrade',
})
const PREVIOUS_RELEASE_HASH = '2f7cd3b5a903d37c70ea3385af47d8a92d69573be49fce6ccea713e44b31ed43'

t.test('a record stored by the previous release replays here, the same bytes', async (t) => {
  const api = await buildTestApp(t)
  const body = userBody()
  const key = newKey()
  const answer = JSON.stringify({
    ...body,
    client_uuid: randomUUID(),
    username: null,
    timezone: 'UTC',
    is_row_invalid: 0,
    invalidation_reason_uuid: null,
    created_at: '2026-11-25T10:00:00.000Z',
    updated_at: '2026-11-25T10:00:00.000Z',
  })
  // The previous release's insertAnswer (without a learner), as it sent it.
  await api.db.sql`
    insert into idempotency_records (key_id, scope, idempotency_key, request_hash, status_code, response_body, expires_at)
    values (${legacyKeyId(API_KEY)}, '/api/v1/user', ${key}, ${PREVIOUS_RELEASE_HASH}, 201, ${answer}, now() + make_interval(hours => ${24}))`
  const replay = await api.post('/api/v1/user', body, key)
  t.equal(replay.statusCode, 201)
  t.equal(replay.headers['idempotent-replayed'], 'true')
  t.equal(replay.headers['idempotency-key'], key)
  t.equal(replay.body, answer, 'the stored bytes')
  t.equal((await api.post('/api/v1/user', { ...body, full_name: 'Other' }, key)).statusCode, 409, 'another body is 409')
  const [users] = await api.db.sql`select count(*)::int as n from users where system_user_id = ${body.system_user_id}`
  t.equal(users!.n, 0, 'the write did not run again')
})

t.test('the previous release finds what this one stored, and its inserts still work', async (t) => {
  const api = await buildTestApp(t)
  const body = userBody()
  const key = newKey()
  const created = await api.post('/api/v1/user', body, key)
  t.equal(created.statusCode, 201)
  // The previous release's lookup (find, without records from before key ids).
  const [found] = await api.db.sql`
    select request_hash, status_code, response_body
    from idempotency_records
    where key_id = ${legacyKeyId(API_KEY)} and scope = '/api/v1/user' and idempotency_key = ${key}
      and expires_at > now() and status_code is not null`
  t.same(found, { request_hash: PREVIOUS_RELEASE_HASH, status_code: 201, response_body: created.body })

  // Its insert with the learner check, for a write on a learner's behalf.
  const [learner] = await api.db
    .sql`select client_uuid, timezone from users where system_user_id = ${body.system_user_id}`
  await api.db.sql`
    insert into idempotency_records (key_id, scope, idempotency_key, request_hash, status_code, response_body, expires_at)
    values (${legacyKeyId(API_KEY)}, '/api/v1/errors', ${key},
            (select ${'h'}::text from users
              where system_user_id = ${body.system_user_id} and system_uuid = ${body.system_uuid}
                and client_uuid = ${learner!.client_uuid} and timezone = ${learner!.timezone}),
            201, '{}', now() + make_interval(hours => ${24}))`
  // And its primary-key collision, which it recognised by the constraint's name.
  const taken = await api.db.sql`
    insert into idempotency_records (key_id, scope, idempotency_key, request_hash, status_code, response_body, expires_at)
    values (${legacyKeyId(API_KEY)}, '/api/v1/user', ${key}, 'h', 201, '{}', now() + interval '1 hour')`.catch(
    (err) => err,
  )
  t.match(taken, { code: '23505', constraint_name: 'idempotency_records_pkey' })
})

t.test('a record from before key ids is not replayed: the write runs', async (t) => {
  const api = await buildTestApp(t)
  const body = userBody()
  await api.db
    .sql`insert into idempotency_records (scope, idempotency_key, request_hash, status_code, response_body, expires_at)
                   values ('/api/v1/user', 'pre-0009', ${PREVIOUS_RELEASE_HASH}, 201, '{"old":true}', now() + interval '1 hour')`
  const res = await api.post('/api/v1/user', body, 'pre-0009')
  t.equal(res.statusCode, 201)
  t.notOk(res.headers['idempotent-replayed'])
  t.equal(res.json().system_user_id, body.system_user_id)
})

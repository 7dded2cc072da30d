// Idempotency per caller: records are keyed by (key id, scope, Idempotency-Key). Two partners
// never replay or 409 each other; a rotated secret (same id) replays; a UUID's case does not
// make a second scope.
import t from 'tap'
import { buildTestApp, newKey } from '../helpers/app.js'
import { createConspectus, createOwner } from '../helpers/fixtures.js'
import { writeKeyFile } from '../helpers/keys.js'

const api = await buildTestApp(t, {
  API_KEYS_FILE: await writeKeyFile(t, [
    { id: 'acme', secret: 'ssk_acme_old' },
    { id: 'acme', secret: 'ssk_acme_new' },
    { id: 'globex', secret: 'ssk_globex' },
    { id: 'initech', secret: 'ssk_initech' },
  ]),
})
const sql = api.db.sql
const owner = await createOwner(api)
const send = (key: string, idempotencyKey: string, message: string) =>
  api.request({
    method: 'POST',
    url: '/api/v1/errors',
    key,
    payload: { ...owner, message },
    headers: { 'idempotency-key': idempotencyKey },
  })
const logCount = async (message: string) =>
  (await sql`select count(*)::int as n from error_logs where message = ${message}`)[0]!.n

t.test('same Idempotency-Key and body from two key ids: two independent effects, no replay across', async (t) => {
  const key = 'order-1' // a short counter-like key, as partners use
  const acme = await send('ssk_acme_old', key, 'same body')
  const globex = await send('ssk_globex', key, 'same body')
  t.equal(acme.statusCode, 201)
  t.equal(globex.statusCode, 201)
  t.notOk(globex.headers['idempotent-replayed'], 'not a replay of the other partner')
  t.not(globex.json().error_log_uuid, acme.json().error_log_uuid)
  t.equal(await logCount('same body'), 2)
  const other = await send('ssk_initech', key, 'another body')
  t.equal(other.statusCode, 201, 'another body under the same key from a third partner: no 409')
  const rows = await sql`select key_id from idempotency_records where idempotency_key = ${key} order by key_id`
  t.same(
    rows.map((r) => r.key_id),
    ['acme', 'globex', 'initech'],
  )
})

t.test('a rotated key (same id, new secret) replays what the old secret stored, with the key echoed', async (t) => {
  const key = newKey()
  const first = await send('ssk_acme_old', key, 'rotation')
  const again = await send('ssk_acme_new', key, 'rotation')
  t.equal(again.statusCode, 201)
  t.equal(again.headers['idempotent-replayed'], 'true')
  t.equal(again.headers['idempotency-key'], key, 'Idempotency-Key echoed on the replay')
  t.equal(again.body, first.body, 'the same bytes')
  t.notOk(first.headers['idempotency-key'], 'not echoed on a first answer')
  const conflict = await send('ssk_acme_new', key, 'rotation, other body')
  t.equal(conflict.statusCode, 409)
  t.equal(await logCount('rotation'), 1)
})

t.test('a conspectus UUID in another case is the same scope: one review', async (t) => {
  const conspectus = await createConspectus(api, owner)
  const key = newKey()
  const body = { ...owner, outcome: 'remembered' }
  const upper = await api.post(
    `/api/v1/conspectuses/${conspectus.conspectus_uuid.toUpperCase()}/actions/review`,
    body,
    key,
  )
  const lower = await api.post(`/api/v1/conspectuses/${conspectus.conspectus_uuid}/actions/review`, body, key)
  t.equal(upper.statusCode, 200)
  t.equal(lower.headers['idempotent-replayed'], 'true')
  t.equal(lower.json().review_count, 1)
  const [row] = await sql`select review_count from conspectuses where conspectus_uuid = ${conspectus.conspectus_uuid}`
  t.equal(row!.review_count, 1, 'reviewed once')
  const scopes = await sql`select scope from idempotency_records where idempotency_key = ${key}`
  t.same(
    scopes.map((r) => r.scope),
    [`/api/v1/conspectuses/${conspectus.conspectus_uuid}/actions/review`],
    'the scope holds the lower-case UUID',
  )
})

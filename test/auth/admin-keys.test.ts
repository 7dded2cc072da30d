// Partner keys as data on one replica: issue, read, list, roll and revoke through the admin
// operations, what a created key may grant, the secret shown once (never in a replay or a
// stored answer), the audit trail, and last_used_at. Several replicas: test/scale/key-propagation.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { API_KEY, buildTestApp, newKey } from '../helpers/app.js'
import { sha256, writeKeyFile } from '../helpers/keys.js'
import { waitFor } from '../helpers/wait.js'
import { legacyKeyId } from '../../src/auth/api-keys.js'

const SYSTEM_A = '3f2c2f57-9d55-4a0b-8a3c-1c1f5b2f4e10'
const SYSTEM_B = '9a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d'
const file = await writeKeyFile(t, [
  { id: 'file-admin', secret: 'ssk_file_admin', scopes: ['keys:admin', 'users:read'], systems: [SYSTEM_A] },
  { id: 'file-plain', secret: 'ssk_file_plain' },
])
const api = await buildTestApp(t, { API_KEYS_FILE: file })
const KEYS = '/api/v1/admin/keys'
const json = (res: { body: string }) => JSON.parse(res.body)
/** The code of a 422's first item. */
const invalid = (res: { statusCode: number; body: string }) => res.statusCode === 422 && json(res).errors[0].code
const readUser = (key: string, system = SYSTEM_A) =>
  api.request({ method: 'GET', url: `/api/v1/user/${system}/nobody`, key })
const create = (body: Record<string, unknown>, key = API_KEY, idempotencyKey = newKey()) =>
  api.request({ method: 'POST', url: KEYS, payload: body, key, headers: { 'idempotency-key': idempotencyKey } })
const roll = (id: string, body: Record<string, unknown>, key = API_KEY) =>
  api.request({
    method: 'POST',
    url: `${KEYS}/${id}/roll`,
    payload: body,
    headers: { 'idempotency-key': newKey() },
    key,
  })

t.test('a created key answers at once, with its secret shown once', async (t) => {
  const idempotencyKey = newKey()
  const body = { id: 'acme-web', scopes: ['users:read'], rate_limit: { max: 5, window_ms: 60_000 } }
  const res = await create(body, API_KEY, idempotencyKey)
  t.equal(res.statusCode, 201)
  const key = json(res)
  t.match(key.secret, /^ssk_[A-Za-z0-9_-]{43}$/, 'an ssk_ secret')
  t.equal(key.prefix, key.secret.slice(0, 8), 'the prefix is the first 8 characters')
  t.same(
    { status: key.status, scopes: key.scopes, systems: key.systems, created_by: key.created_by },
    { status: 'active', scopes: ['users:read'], systems: null, created_by: legacyKeyId(API_KEY) },
  )
  t.same(key.rate_limit, { max: 5, window_ms: 60_000 })

  const used = await readUser(key.secret)
  t.equal(used.statusCode, 404, 'the new secret is accepted (no such user)')
  t.equal(used.headers['x-ratelimit-limit'], '5', "the key's own rate limit")
  const write = await api.request({
    method: 'POST',
    url: '/api/v1/user',
    key: key.secret,
    payload: { system_user_id: 'u', system_uuid: SYSTEM_A, full_name: 'U' },
    headers: { 'idempotency-key': newKey() },
  })
  t.equal(json(write).key, 'SECURITY_SCOPE_MISSING', 'and holds only its scopes')

  const replay = await create(body, API_KEY, idempotencyKey)
  t.equal(replay.statusCode, 201)
  t.equal(replay.headers['idempotent-replayed'], 'true')
  const { secret: _shown, ...withoutSecret } = key
  t.same(json(replay), withoutSecret, 'a replay answers the key without its secret')

  const stored = await api.db.sql`select response_body from idempotency_records`
  t.ok(stored.length > 0)
  t.notOk(
    stored.some((r) => String(r.response_body).includes(key.secret)),
    'no stored answer holds the secret',
  )
  const [row] = await api.db.sql`select digest from api_key_secrets where key_id = 'acme-web'`
  t.equal(Buffer.from(row!.digest).toString('hex'), sha256(key.secret), 'the table holds its SHA-256 only')

  const read = await api.get(`${KEYS}/acme-web`)
  t.equal(read.statusCode, 200)
  t.notOk('secret' in json(read), 'a read never shows the secret')
  // A key never used reads last_used_at null: waitFor goes on until it is written.
  const lastUsed = await waitFor(
    'last_used_at',
    async () => json(await api.get(`${KEYS}/acme-web`)).last_used_at as string | null,
  )
  t.type(lastUsed, 'string', 'last_used_at is written once the key answered')
  const hour = new Date(lastUsed)
  t.same([hour.getUTCMinutes(), hour.getUTCSeconds(), hour.getUTCMilliseconds()], [0, 0, 0], 'to the hour')
})

t.test('ids that are taken', async (t) => {
  for (const id of ['acme-web', 'file-plain', legacyKeyId('anything'), legacyKeyId(API_KEY)]) {
    const res = await create({ id, scopes: ['users:read'] })
    t.equal(res.statusCode, 409, id)
    t.equal(json(res).key, 'ADMIN_KEY_ID_TAKEN', id)
  }
  t.equal(invalid(await create({ id: '-leading-dash' })), 'KEYS_001', 'an id outside the pattern is 422')
  t.equal(invalid(await create({ id: 'x', secret: 'mine' })), 'KEYS_008', 'a secret cannot be chosen')
})

t.test('a key grants only what its creator holds', async (t) => {
  const byFile = (body: Record<string, unknown>) => create(body, 'ssk_file_admin')
  const wider = await byFile({ id: 'wider', scopes: ['users:write'] })
  t.equal(wider.statusCode, 403)
  t.same(json(wider), {
    code: 'KEYS_403',
    key: 'ADMIN_KEY_GRANT_NOT_HELD',
    message: 'A key may grant only scopes and systems its creator holds.',
    source: 'security',
  })
  t.equal(json(await byFile({ id: 'elsewhere', systems: [SYSTEM_B] })).key, 'ADMIN_KEY_GRANT_NOT_HELD')

  const narrow = json(await byFile({ id: 'narrow' }))
  t.same(narrow.scopes, ['users:read'], "default: the creator's scopes without keys:admin")
  t.same(narrow.systems, [SYSTEM_A], "and the creator's systems")
  t.equal(narrow.created_by, 'file-admin')
  t.equal((await readUser(narrow.secret, SYSTEM_B)).statusCode, 403, 'bound to system A')

  const full = json(await create({ id: 'no-admin' }))
  t.notOk(full.scopes.includes('keys:admin'), 'a full creator gives every scope but the explicit-only ones')
  t.notOk(full.scopes.includes('users:erase'))
  t.equal(json(await api.get(KEYS, { 'x-api-key': full.secret })).key, 'SECURITY_SCOPE_MISSING')
  const admin = json(await create({ id: 'named-admin', scopes: ['keys:admin'] }))
  t.equal((await api.get(KEYS, { 'x-api-key': admin.secret })).statusCode, 200, 'keys:admin when named')
  const plain = await create({ id: 'by-plain' }, 'ssk_file_plain')
  t.equal(json(plain).key, 'SECURITY_SCOPE_MISSING', 'a file key without scopes lacks keys:admin')

  const budget = await create({ id: 'budget', max_body_bytes_in_flight: 1 })
  t.equal(json(budget).code, 'KEYS_400', 'a body budget below one body is refused')
})

t.test('roll: the new secret at once, the old one for the overlap', async (t) => {
  const first = json(await create({ id: 'rolling', scopes: ['users:read'] }))
  const now = json(await roll('rolling', { expires_in_seconds: 0 }))
  t.not(now.secret, first.secret)
  t.equal(now.prefix, now.secret.slice(0, 8))
  t.equal((await readUser(first.secret)).statusCode, 401, 'overlap 0: the old secret stops now')
  t.equal((await readUser(now.secret)).statusCode, 404, 'the new one works')
  t.equal(now.previous_secret_expires_at, null)

  const later = json(await roll('rolling', { expires_in_seconds: 2 }))
  t.ok(later.previous_secret_expires_at, 'says when the old secret stops')
  t.equal((await readUser(now.secret)).statusCode, 404, 'within the overlap both work')
  t.equal((await readUser(later.secret)).statusCode, 404)
  await waitFor('the old secret to stop', async () => (await readUser(now.secret)).statusCode === 401)
  t.equal((await readUser(later.secret)).statusCode, 404, 'then only the new one')

  const missing = await roll('nobody-here', {})
  t.equal(json(missing).key, 'ADMIN_KEY_NOT_FOUND')
  t.equal(invalid(await roll('rolling', { expires_in_seconds: 604_801 })), 'KEYS_010')
})

t.test('revoke: at once, once, and listed with its time', async (t) => {
  const key = json(await create({ id: 'leaked', scopes: ['users:read'] }))
  t.equal((await readUser(key.secret)).statusCode, 404)
  const revoked = await api.request({ method: 'DELETE', url: `${KEYS}/leaked` })
  t.equal(revoked.statusCode, 200)
  t.equal(json(revoked).status, 'revoked')
  t.equal((await readUser(key.secret)).statusCode, 401, 'the secret stops at once')
  const again = await api.request({ method: 'DELETE', url: `${KEYS}/leaked` })
  t.equal(json(again).revoked_at, json(revoked).revoked_at, 'a second revoke changes nothing')
  t.equal(json(await roll('leaked', {})).key, 'ADMIN_KEY_REVOKED', 'a revoked key cannot be rolled')
  t.equal(json(await api.request({ method: 'DELETE', url: `${KEYS}/nobody-here` })).key, 'ADMIN_KEY_NOT_FOUND')
  t.equal(json(await create({ id: 'leaked' })).key, 'ADMIN_KEY_ID_TAKEN', 'its id is never issued again')
})

t.test('an expired key answers 401 and reads as expired', async (t) => {
  const key = json(await create({ id: 'short-lived', expires_at: new Date(Date.now() + 1500).toISOString() }))
  t.equal((await readUser(key.secret)).statusCode, 404)
  await waitFor('the key to expire', async () => (await readUser(key.secret)).statusCode === 401)
  t.equal(json(await api.get(`${KEYS}/short-lived`)).status, 'expired')
})

t.test('the list pages through every key; the audit names every action', async (t) => {
  const ids: string[] = []
  let cursor: string | null = null
  do {
    const res = await api.get(`${KEYS}?limit=2${cursor ? `&cursor=${cursor}` : ''}`)
    t.equal(res.statusCode, 200)
    const page = json(res)
    t.ok(page.items.length <= 2)
    for (const item of page.items) t.notOk('secret' in item)
    ids.push(...page.items.map((k: { id: string }) => k.id))
    cursor = page.next_cursor
  } while (cursor)
  const [{ count }] = (await api.db.sql`select count(*)::int as count from api_keys`) as unknown as [{ count: number }]
  t.equal(ids.length, count, 'every key once')
  t.equal(new Set(ids).size, ids.length)
  t.equal(invalid(await api.get(`${KEYS}?cursor=bm9wZQ`)), 'COMMON_422', 'a made-up cursor')

  const requestId = randomUUID()
  await api.request({
    method: 'POST',
    url: `${KEYS}/rolling/roll`,
    payload: {},
    headers: { 'idempotency-key': newKey(), 'x-request-id': requestId },
  })
  const audit = json(await api.get('/api/v1/admin/audit?key_id=rolling'))
  t.same(
    audit.items.map((e: { action: string }) => e.action),
    ['key.roll', 'key.roll', 'key.roll', 'key.create'],
    'newest first, one row per action on the key',
  )
  t.equal(audit.items[0].actor_key_id, legacyKeyId(API_KEY))
  t.equal(audit.items[0].client_request_id, requestId, "the client's X-Request-Id, marked as the client's")
  t.match(audit.items[0].request_id, /^[0-9a-f-]{36}$/, "the request id is the server's own")
  t.not(audit.items[0].request_id, requestId, 'never the one the client chose')
  const all: { action: string }[] = []
  let next: string | null = null
  do {
    const page = json(await api.get(`/api/v1/admin/audit?limit=3${next ? `&cursor=${next}` : ''}`))
    all.push(...page.items)
    next = page.next_cursor
  } while (next)
  const [{ rows }] = (await api.db.sql`select count(*)::int as rows from admin_audit`) as unknown as [{ rows: number }]
  t.equal(all.length, rows, 'the audit pages through every row')
  t.equal(all.filter((e) => e.action === 'key.revoke').length, 1, 'one revoke row for two DELETEs')
})

t.test('no secret is stored anywhere', async (t) => {
  const key = json(await create({ id: 'scanned', scopes: ['users:read'] }))
  await readUser(key.secret)
  const digestHex = sha256(key.secret)
  const tables = await api.db.sql<{ table_name: string }[]>`
    select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`
  for (const { table_name } of tables) {
    const rows = await api.db.sql`select t::text as text from ${api.db.sql(table_name)} t`
    const text = rows.map((r) => r.text as string).join('\n')
    t.notOk(text.includes(key.secret), `${table_name}: no secret`)
    if (table_name !== 'api_key_secrets') t.notOk(text.includes(digestHex), `${table_name}: no digest`)
    t.notOk(text.includes(key.secret.slice(9)), `${table_name}: no part of the secret past its prefix`)
  }
})

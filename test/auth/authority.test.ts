// Authority only narrows, on one replica: an admin key acts only on the keys of its own partner
// that it could have created (anything else is absent: 404 KEYS_404, left out of lists and the
// audit); a created key is never wider than its creator in scopes, systems, rate, concurrency,
// body bytes or expiry; revoking a key revokes what it created; a partner's keys share its
// rate; ids compare without case; answers carrying a secret are not cached.
// Two replicas: test/scale/partner-keys.test.ts. Held uploads: test/platform/partner-budgets.test.ts.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { API_KEY, buildTestApp, newKey } from '../helpers/app.js'
import { writeKeyFile } from '../helpers/keys.js'
import { legacyKeyId } from '../../src/auth/api-keys.js'

const SYSTEM_A = '3f2c2f57-9d55-4a0b-8a3c-1c1f5b2f4e10'
const SYSTEM_B = '9a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d'
const SUB_EXPIRES = new Date(Date.now() + 3 * 3_600_000).toISOString()
const file = await writeKeyFile(t, [
  // A narrow admin of its own partner, as in the attack: one system, 20 a minute, 2 at once, 3 hours.
  {
    id: 'sub',
    secret: 'ssk_sub',
    scopes: ['keys:admin', 'users:read', 'study:read'],
    systems: [SYSTEM_A],
    rate_limit: { max: 20, window_ms: 60_000 },
    max_concurrent_requests: 2,
    expires_at: SUB_EXPIRES,
  },
  // A partner's root that holds everything a file key can, keys:admin included.
  {
    id: 'acme',
    secret: 'ssk_acme',
    scopes: ['keys:admin', 'users:read', 'users:write', 'study:read', 'study:write'],
  },
  // A partner whose root allows 5 requests a minute, shared by every key it creates.
  { id: 'rated', secret: 'ssk_rated', scopes: ['keys:admin', 'users:read'], rate_limit: { max: 5, window_ms: 60_000 } },
])
const api = await buildTestApp(t, { API_KEYS_FILE: file })
const KEYS = '/api/v1/admin/keys'
const json = (res: { body: string }) => JSON.parse(res.body)
const as = (key: string) => ({
  create: (body: Record<string, unknown>) =>
    api.request({ method: 'POST', url: KEYS, payload: body, key, headers: { 'idempotency-key': newKey() } }),
  roll: (id: string, body: Record<string, unknown> = {}) =>
    api.request({
      method: 'POST',
      url: `${KEYS}/${id}/roll`,
      payload: body,
      key,
      headers: { 'idempotency-key': newKey() },
    }),
  revoke: (id: string) => api.request({ method: 'DELETE', url: `${KEYS}/${id}`, key }),
  read: (id: string) => api.request({ method: 'GET', url: `${KEYS}/${id}`, key }),
  list: async () => {
    const ids: string[] = []
    let cursor: string | null = null
    do {
      const page = json(
        await api.request({ method: 'GET', url: `${KEYS}?limit=100${cursor ? `&cursor=${cursor}` : ''}`, key }),
      )
      ids.push(...page.items.map((k: { id: string }) => k.id))
      cursor = page.next_cursor
    } while (cursor)
    return ids
  },
  audit: async (query = '') =>
    json(await api.request({ method: 'GET', url: `/api/v1/admin/audit?limit=100${query}`, key })).items as {
      target_key_id: string
      action: string
      actor_key_id: string
    }[],
})
const full = as(API_KEY)
const sub = as('ssk_sub')
const acme = as('ssk_acme')
const readUser = (key: string, system = SYSTEM_A) =>
  api.request({ method: 'GET', url: `/api/v1/user/${system}/nobody`, key })
const absent = (res: { statusCode: number; body: string }) =>
  res.statusCode === 404 && json(res).code === 'KEYS_404' && json(res).key === 'ADMIN_KEY_NOT_FOUND'

t.test('a narrower admin cannot roll, revoke, read, list or audit a key beyond its grant', async (t) => {
  const big = await full.create({ id: 'bigkey', scopes: ['users:read', 'users:write', 'users:erase', 'keys:admin'] })
  t.equal(big.statusCode, 201)
  const bigSecret = json(big).secret as string
  t.equal(json(big).partner, legacyKeyId(API_KEY), "a key of the full-access key's partner")

  t.ok(absent(await sub.roll('bigkey', { expires_in_seconds: 0 })), 'roll: 404 as if absent, no new secret')
  t.ok(absent(await sub.revoke('bigkey')), 'revoke: 404')
  t.ok(absent(await sub.read('bigkey')), 'read: 404')
  t.ok(absent(await sub.read('no-such-key')), 'the same answer as for a key that does not exist')
  t.notOk((await sub.list()).includes('bigkey'), 'list: not listed')
  t.same(await sub.audit('&key_id=bigkey'), [], 'audit: no row on it')
  t.notOk(
    (await sub.audit()).some((e) => e.target_key_id === 'bigkey'),
    'audit: nowhere',
  )
  t.equal((await readUser(bigSecret)).statusCode, 404, "the holder's secret still works")
  t.equal(json(await full.read('bigkey')).status, 'active')

  // Within one partner too: a key beyond the actor's grant is out of its reach.
  t.equal((await acme.create({ id: 'acme-writer', scopes: ['users:read', 'users:write'] })).statusCode, 201)
  const narrowAdmin = json(await acme.create({ id: 'acme-admin', scopes: ['keys:admin', 'users:read'] }))
  t.equal(narrowAdmin.partner, 'acme', "its creator's partner")
  const acmeAdmin = as(narrowAdmin.secret)
  t.ok(absent(await acmeAdmin.roll('acme-writer')), 'a wider key of the same partner: 404')
  t.ok(absent(await acmeAdmin.revoke('acme-writer')))
  t.ok(absent(await acmeAdmin.read('acme-writer')))
  t.equal((await acmeAdmin.create({ id: 'acme-reader' })).statusCode, 201)
  t.same((await acmeAdmin.list()).sort(), ['acme-admin', 'acme-reader'], 'it lists itself and what it could create')
  t.same(
    [...new Set((await acmeAdmin.audit()).map((e) => e.target_key_id))].sort(),
    ['acme-admin', 'acme-reader'],
    'and audits only those',
  )
  t.same((await acme.list()).sort(), ['acme-admin', 'acme-reader', 'acme-writer'], "the root lists its partner's keys")
  t.ok(absent(await acme.read('bigkey')), "but no other partner's")
  t.ok((await full.list()).includes('acme-writer'), 'a full-access key lists every key')
  t.equal((await acmeAdmin.roll('acme-reader')).statusCode, 200, 'it acts on what lies within its grant')
})

t.test('a created key is never wider than its creator; omitted limits are the creator’s', async (t) => {
  const refused = async (body: Record<string, unknown>, key: string) => {
    const res = await sub.create({ id: `wide-${randomUUID().slice(0, 8)}`, ...body })
    t.equal(res.statusCode, 403, key)
    t.same({ code: json(res).code, key: json(res).key }, { code: 'KEYS_403', key }, key)
  }
  await refused({ rate_limit: { max: 1_000_000, window_ms: 1000 } }, 'ADMIN_KEY_RATE_LIMIT_NOT_HELD')
  await refused({ rate_limit: { max: 40, window_ms: 120_000 } }, 'ADMIN_KEY_RATE_LIMIT_NOT_HELD')
  await refused({ rate_limit: { max: 10, window_ms: 1000 } }, 'ADMIN_KEY_RATE_LIMIT_NOT_HELD')
  await refused({ max_concurrent_requests: 100_000 }, 'ADMIN_KEY_CONCURRENCY_NOT_HELD')
  await refused({ max_concurrent_requests: 3 }, 'ADMIN_KEY_CONCURRENCY_NOT_HELD')
  await refused({ max_body_bytes_in_flight: 16 * 1_048_576 }, 'ADMIN_KEY_BODY_BYTES_NOT_HELD')
  await refused({ expires_at: '9999-12-31T00:00:00Z' }, 'ADMIN_KEY_EXPIRY_NOT_HELD')
  await refused({ systems: [SYSTEM_B] }, 'ADMIN_KEY_GRANT_NOT_HELD')

  const child = json(await sub.create({ id: 'sub-child', scopes: ['keys:admin', 'users:read'] }))
  t.same(child.rate_limit, { max: 20, window_ms: 60_000 }, "the creator's rate limit")
  t.equal(child.max_concurrent_requests, 2, "the creator's concurrency")
  t.equal(Date.parse(child.expires_at), Date.parse(SUB_EXPIRES), "the creator's expiry")
  t.same(child.systems, [SYSTEM_A])
  t.equal(child.partner, 'sub')
  const narrower = await sub.create({
    id: 'sub-slow',
    rate_limit: { max: 10, window_ms: 60_000 },
    max_concurrent_requests: 1,
  })
  t.equal(narrower.statusCode, 201, 'narrower in every way is allowed')

  // And a created key's own creations are held to it, not to the root.
  const grandchild = await as(child.secret).create({
    id: 'sub-grandchild',
    expires_at: new Date(Date.parse(SUB_EXPIRES) + 60_000).toISOString(),
  })
  t.equal(json(grandchild).key, 'ADMIN_KEY_EXPIRY_NOT_HELD', "no later than its creator's expiry")
})

t.test('revoking a key revokes the keys it created, and theirs, each audited', async (t) => {
  const a = json(await acme.create({ id: 'chain-a', scopes: ['keys:admin', 'users:read'] }))
  const b = json(await as(a.secret).create({ id: 'chain-b', scopes: ['keys:admin', 'users:read'] }))
  const c = json(await as(b.secret).create({ id: 'chain-c', scopes: ['users:read'] }))
  t.equal(c.partner, 'acme', 'every generation belongs to the root partner')
  for (const key of [a, b, c]) t.equal((await readUser(key.secret)).statusCode, 404, `${key.id} works`)

  const requestId = randomUUID()
  const res = await api.request({
    method: 'DELETE',
    url: `${KEYS}/chain-a`,
    key: 'ssk_acme',
    headers: { 'x-request-id': requestId },
  })
  t.equal(res.statusCode, 200)
  for (const key of [a, b, c]) {
    t.equal((await readUser(key.secret)).statusCode, 401, `${key.id} stops at once`)
    t.equal(json(await acme.read(key.id)).status, 'revoked', `${key.id} reads as revoked`)
  }
  const rows = (await acme.audit()).filter((e) => e.action === 'key.revoke')
  t.same(rows.map((e) => e.target_key_id).sort(), ['chain-a', 'chain-b', 'chain-c'], 'one revoke row per key')
  t.ok(rows.every((e) => e.actor_key_id === 'acme'))
  t.equal((await acme.revoke('chain-a')).statusCode, 200)
  t.equal((await acme.audit()).filter((e) => e.action === 'key.revoke').length, 3, 'a second revoke adds nothing')
})

t.test('ids compare without case', async (t) => {
  for (const id of ['ACME', 'Sub', 'BIGKEY', 'Acme-Writer']) {
    const res = await full.create({ id })
    t.equal(res.statusCode, 409, id)
    t.same({ code: json(res).code, key: json(res).key }, { code: 'KEYS_409', key: 'ADMIN_KEY_ID_TAKEN' }, id)
  }
  t.equal(json(await full.read('BigKey')).id, 'bigkey', 'a read finds the key whatever the case')
})

t.test('answers that carry a secret are not cached', async (t) => {
  const idempotencyKey = newKey()
  const post = () =>
    api.request({
      method: 'POST',
      url: KEYS,
      payload: { id: 'cached' },
      headers: { 'idempotency-key': idempotencyKey },
    })
  const created = await post()
  t.equal(created.statusCode, 201)
  t.equal(created.headers['cache-control'], 'no-store', 'create')
  t.equal((await post()).headers['cache-control'], 'no-store', 'its replay')
  const rolled = await full.roll('cached')
  t.ok(json(rolled).secret)
  t.equal(rolled.headers['cache-control'], 'no-store', 'roll')
})

t.test("a partner's keys share its rate: creating keys never multiplies it", async (t) => {
  const rated = as('ssk_rated')
  const children: string[] = []
  for (let i = 0; i < 3; i++)
    children.push(json(await rated.create({ id: `rated-${i}`, scopes: ['users:read'] })).secret)
  // The root spent 3 of its 5 on the creations; its keys share the 2 left.
  const statuses: number[] = []
  for (const secret of children) for (let i = 0; i < 5; i++) statuses.push((await readUser(secret)).statusCode)
  t.equal(statuses.filter((s) => s === 404).length, 2, "two requests in all, the partner's window")
  const refused = await readUser(children[2]!)
  t.equal(refused.statusCode, 429)
  t.equal(json(refused).key, 'SECURITY_RATE_LIMIT_EXCEEDED')
  t.ok(Number(refused.headers['retry-after']) >= 1, 'with Retry-After')
  t.equal((await readUser(API_KEY)).statusCode, 404, 'another partner is not held back')
})

// Revocation and expiry reach the keys a key created, on the other replica, within a second:
// two real servers on one PostgreSQL database. A key revoked on replica A takes the keys it
// created (and theirs) with it on replica B, on B's keep-alive connections that already used
// them; a key created by a key that expires stops at that expiry on B too. With Redis, a
// partner's rate is one window across replicas, whichever of its keys sends.
import t from 'tap'
import http from 'node:http'
import { createTestDatabase } from '../helpers/database.js'
import { startServer, type ServerProcess } from '../helpers/server-process.js'
import { waitFor } from '../helpers/wait.js'
import { keepAliveCall as call } from '../helpers/keep-alive-call.js'
import { startPrivateRedis } from '../helpers/private-redis.js'
import { writeKeyFile } from '../helpers/keys.js'

const ADMIN = 'partner-keys-admin-secret'
const SYSTEM = '3f2c2f57-9d55-4a0b-8a3c-1c1f5b2f4e10'
/** The bound the contract states for a change to reach every replica. */
const WITHIN_MS = 1000

t.setTimeout(300_000)

t.test('revocation and expiry reach created keys on the other replica within a second', async (t) => {
  const db = await createTestDatabase(t)
  const env = { DATABASE_URL: db.url, API_KEYS: ADMIN, RATE_LIMIT_MAX: '100000' }
  const [a, b] = (await Promise.all([startServer(t, env), startServer(t, env)])) as [ServerProcess, ServerProcess]
  const agentA = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agentA.destroy())
  const onA = (key: string, method: string, path: string, body?: unknown) =>
    call(agentA, a.base, method, path, key, body)
  // One keep-alive agent per key on B: a revocation must stop connections that already used it.
  const agentsB = new Map<string, http.Agent>()
  t.teardown(() => {
    for (const agent of agentsB.values()) agent.destroy()
  })
  const readOnB = (key: string) => {
    let agent = agentsB.get(key)
    if (!agent) {
      agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
      agentsB.set(key, agent)
    }
    return call(agent, b.base, 'GET', `/api/v1/user/${SYSTEM}/nobody`, key)
  }
  const create = async (by: string, body: Record<string, unknown>) => {
    const res = await onA(by, 'POST', '/api/v1/admin/keys', body)
    t.equal(res.status, 201, `${body.id as string} created`)
    return JSON.parse(res.body) as { id: string; secret: string; expires_at: string | null; partner: string }
  }
  /** Ms from `since` until B refuses every one of `secrets` (polling each until it does). */
  const untilRefusedOnB = async (secrets: string[], since: number) => {
    for (const secret of secrets)
      await waitFor('B to refuse the key', async () => (await readOnB(secret)).status === 401, { everyMs: 5 })
    return Date.now() - since
  }

  const parent = await create(ADMIN, { id: 'parent', scopes: ['keys:admin', 'users:read'] })
  const child = await create(parent.secret, { id: 'child', scopes: ['keys:admin', 'users:read'] })
  const grandchild = await create(child.secret, { id: 'grandchild', scopes: ['users:read'] })
  for (const key of [parent, child, grandchild])
    await waitFor(`${key.id} on B`, async () => (await readOnB(key.secret)).status === 404)
  t.pass('three generations work on B')

  const revoked = await onA(ADMIN, 'DELETE', '/api/v1/admin/keys/parent')
  t.equal(revoked.status, 200)
  const revokeMs = await untilRefusedOnB([child.secret, grandchild.secret, parent.secret], Date.now())
  t.ok(revokeMs <= WITHIN_MS, `the created keys stop on B ${revokeMs} ms after the revocation's answer`)
  const refused = await readOnB(grandchild.secret)
  t.ok(refused.reusedSocket, "refused on B's keep-alive connection that used the key before")
  const audit = JSON.parse((await onA(ADMIN, 'GET', '/api/v1/admin/audit?limit=100')).body).items as {
    action: string
    target_key_id: string
  }[]
  t.same(
    audit
      .filter((e) => e.action === 'key.revoke')
      .map((e) => e.target_key_id)
      .sort(),
    ['child', 'grandchild', 'parent'],
    'each revocation has its audit row',
  )

  // A key that expires in a few seconds; what it creates without an expiry takes its expiry.
  const expiresAt = new Date(Date.now() + 4000).toISOString()
  const short = await create(ADMIN, { id: 'short', scopes: ['keys:admin', 'users:read'], expires_at: expiresAt })
  const made = await create(short.secret, { id: 'short-child', scopes: ['users:read'] })
  t.equal(Date.parse(made.expires_at!), Date.parse(expiresAt), "a created key takes its creator's expiry")
  await waitFor('the created key on B', async () => (await readOnB(made.secret)).status === 404)
  const expiryMs = await untilRefusedOnB([made.secret], Date.parse(expiresAt))
  t.ok(expiryMs <= WITHIN_MS, `the created key stops on B ${expiryMs} ms after its creator's expiry`)
  t.equal((await readOnB(short.secret)).status, 401, 'as its creator does')
  t.comment(`revocation reached created keys on B in ${revokeMs} ms; expiry in ${expiryMs} ms`)
})

t.test("with Redis, a partner's keys share its rate across replicas", async (t) => {
  const db = await createTestDatabase(t)
  const redis = await startPrivateRedis(t)
  const file = await writeKeyFile(t, [
    {
      id: 'rated',
      secret: 'ssk_rated',
      scopes: ['keys:admin', 'users:read'],
      rate_limit: { max: 6, window_ms: 600_000 },
    },
  ])
  const env = { DATABASE_URL: db.url, REDIS_URL: redis.url, API_KEYS_FILE: file, RATE_LIMIT_MAX: '100000' }
  const [a, b] = (await Promise.all([startServer(t, env), startServer(t, env)])) as [ServerProcess, ServerProcess]
  const agent = new http.Agent({ keepAlive: true })
  t.teardown(() => agent.destroy())
  // Both replicas decide in Redis once a keyless request (its address's window) moves neither's
  // fallback counter.
  const fallbacks = async (base: string) =>
    Number(/^rate_limit_store_fallback_total (\d+)/m.exec(await (await fetch(`${base}/metrics`)).text())?.[1] ?? 0)
  for (const replica of [a, b])
    await waitFor('the replica to decide in Redis', async () => {
      const before = await fallbacks(replica.base)
      await fetch(`${replica.base}/api/v1/user/${SYSTEM}/nobody`)
      return (await fallbacks(replica.base)) === before
    })
  const secrets: string[] = []
  for (const id of ['rated-a', 'rated-b']) {
    const res = await call(agent, a.base, 'POST', '/api/v1/admin/keys', 'ssk_rated', { id, scopes: ['users:read'] })
    t.equal(res.status, 201)
    secrets.push(JSON.parse(res.body).secret)
  }
  // The root spent 2 of its 6 on the creations; its keys share the 4 left, on either replica.
  const readOn = (base: string, secret: string) =>
    call(agent, base, 'GET', `/api/v1/user/${SYSTEM}/nobody`, secret).then((r) => r.status)
  // B knows the key once it answers other than 401 (a 401 counts against the address, not the key).
  const statuses: number[] = [
    await waitFor('the second key on B', async () => {
      const status = await readOn(b.base, secrets[1]!)
      return status !== 401 && status
    }),
  ]
  for (let i = 0; i < 4; i++) statuses.push(await readOn(a.base, secrets[0]!), await readOn(b.base, secrets[1]!))
  t.same(
    statuses.filter((s) => s !== 429),
    [404, 404, 404, 404],
    "four answers in all, across both replicas: the partner's window",
  )
  t.equal(statuses.filter((s) => s === 429).length, 5, 'the rest 429')
})

// Partner keys as data across replicas: two real servers on one PostgreSQL database and one
// private Redis. A key created, rolled or revoked through one replica is in effect on the other
// (a revocation even on a keep-alive connection that already used the key), also after the
// other replica's LISTEN connection was killed; every action has its audit row; no log line
// holds a secret. How fast it arrives is measured by the former make bench-keys run (bench/key-propagation.ts (git history)).
import t from 'tap'
import http from 'node:http'
import { createTestDatabase } from '../helpers/database.js'
import { startServer, type ServerProcess } from '../helpers/server-process.js'
import { startPrivateRedis } from '../helpers/private-redis.js'
import { waitFor } from '../helpers/wait.js'
import { keepAliveCall as call } from '../helpers/keep-alive-call.js'

const ADMIN = 'propagation-admin-secret'
const SYSTEM = '3f2c2f57-9d55-4a0b-8a3c-1c1f5b2f4e10'

t.setTimeout(300_000)

t.test('a key change on one replica is in effect on the other', async (t) => {
  const db = await createTestDatabase(t)
  const redis = await startPrivateRedis(t)
  const env = {
    DATABASE_URL: db.url,
    REDIS_URL: redis.url,
    API_KEYS: ADMIN,
    LOG_LEVEL: 'info',
    RATE_LIMIT_MAX: '100000',
  }
  const [a, b] = (await Promise.all([startServer(t, env), startServer(t, env)])) as [ServerProcess, ServerProcess]
  const agentA = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const agentB = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => {
    agentA.destroy()
    agentB.destroy()
  })
  const onA = (method: string, path: string, body?: unknown) => call(agentA, a.base, method, path, ADMIN, body)
  const readOnB = (key: string) => call(agentB, b.base, 'GET', `/api/v1/user/${SYSTEM}/nobody`, key)
  const secrets: string[] = []

  const created = await onA('POST', '/api/v1/admin/keys', { id: 'partner', scopes: ['users:read'] })
  t.equal(created.status, 201)
  const first = JSON.parse(created.body).secret as string
  secrets.push(first)
  await waitFor('the new key on the other replica', async () => (await readOnB(first)).status === 404)
  t.pass('created on A, accepted by B')

  const rolled = await onA('POST', '/api/v1/admin/keys/partner/roll', { expires_in_seconds: 2 })
  t.equal(rolled.status, 200)
  const second = JSON.parse(rolled.body).secret as string
  secrets.push(second)
  await waitFor('the rolled secret on the other replica', async () => (await readOnB(second)).status === 404)
  t.equal((await readOnB(first)).status, 404, 'within the overlap the old secret works on B too')
  await waitFor('the old secret to stop on B', async () => (await readOnB(first)).status === 401)
  t.equal((await readOnB(second)).status, 404, 'then only the new one')

  // The other replica's LISTEN connection is killed: it listens again and re-reads every key.
  const killed = await db.sql`
    select pg_terminate_backend(pid) as done from pg_stat_activity
    where datname = current_database() and query ilike 'listen%'`
  t.equal(killed.length, 2, "both replicas' LISTEN connections are killed")
  await waitFor(
    'both replicas to listen again',
    async () =>
      (await db.sql`select 1 from pg_stat_activity where datname = current_database() and query ilike 'listen%'`)
        .length === 2,
  )

  const warm = await readOnB(second)
  t.equal(warm.status, 404, 'B answers the key on its keep-alive connection')
  const revoked = await onA('DELETE', '/api/v1/admin/keys/partner')
  t.equal(revoked.status, 200)
  const refused = await waitFor('the revocation on the other replica', async () => {
    const answer = await readOnB(second)
    return answer.status === 401 ? answer : false
  })
  t.ok(refused.reusedSocket, 'refused on the keep-alive connection that already used the key')
  t.equal(JSON.parse(refused.body).key, 'SECURITY_AUTH_REQUIRED')

  const audit = JSON.parse((await onA('GET', '/api/v1/admin/audit?key_id=partner')).body)
  t.same(
    audit.items.map((e: { action: string }) => e.action),
    ['key.revoke', 'key.roll', 'key.create'],
    'every action has its audit row',
  )
  const lines = [...a.output().split('\n'), ...b.output().split('\n')]
  const leaks = lines.filter((line) => [...secrets, ADMIN].some((secret) => line.includes(secret)))
  t.same(leaks, [], 'no log line holds a secret')
  t.match(a.output(), /"created":"partner"/, 'the creation is logged with the key ids')
})

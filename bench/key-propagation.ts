// `make bench-keys`: how long a key revocation made through one replica takes to reach another.
// Two replicas (the built service) on one fresh database and one private Redis; replica B is
// kept busy by autocannon (GET user with an API_KEYS key, BENCH_KEYS_CONNECTIONS connections)
// while, KEYS_ROUNDS times, a key is created on A, used on B over one keep-alive connection,
// revoked on A, and B is asked on that connection until it answers 401. The time from A's
// answer to the revocation until B's first 401 is the propagation time (it includes one request
// of B under load, so it is an upper bound). Results: bench/key-propagation.md.
import http from 'node:http'
import { randomBytes } from 'node:crypto'
import autocannon from 'autocannon'
import postgres from 'postgres'
import { migrate } from '../src/db/migrate.js'
import { ADMIN_URL, databaseUrl } from '../test/helpers/database.js'
import { startPrivateRedis } from '../test/helpers/private-redis.js'
import { freePort } from '../test/helpers/server-process.js'
import { keepAliveCall as call } from '../test/helpers/keep-alive-call.js'
import { API_KEY, median, startServer, stopServers } from './harness.js'
import { writeResults } from './results-file.js'

const ROUNDS = Number(process.env.KEYS_ROUNDS ?? 20)
const CONNECTIONS = Number(process.env.BENCH_KEYS_CONNECTIONS ?? 20)
const SYSTEM = '3f2c2f57-9d55-4a0b-8a3c-1c1f5b2f4e10'

// A tap-free stand-in for the test helpers' `t`: what private Redis needs to stop itself.
const teardowns: (() => unknown)[] = []
const owner = { teardown: (fn: () => unknown) => teardowns.push(fn) } as never

const name = `bench_keys_${randomBytes(3).toString('hex')}`
const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
await admin.unsafe(`create database "${name}"`)
const sql = postgres(databaseUrl(name), { max: 1, onnotice: () => {} })
await migrate(sql as never)
const redis = await startPrivateRedis(owner)
const env = {
  DATABASE_URL: databaseUrl(name),
  REDIS_URL: redis.url,
  API_KEYS: API_KEY,
  RATE_LIMIT_MAX: '10000000',
  LOG_LEVEL: 'warn',
  LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0',
}
const [portA, portB] = [await freePort(), await freePort()]
const a = await startServer('replica A', ['dist/src/server.js'], portA, env)
const b = await startServer('replica B', ['dist/src/server.js'], portB, env)

const load = autocannon({
  url: `${b.base}/api/v1/user/${SYSTEM}/nobody`,
  connections: CONNECTIONS,
  duration: 3600,
  headers: { 'x-api-key': API_KEY },
})
const agentA = new http.Agent({ keepAlive: true, maxSockets: 1 })
const agentB = new http.Agent({ keepAlive: true, maxSockets: 1 })
const times: number[] = []
let probes = 0
try {
  for (let round = 0; round < ROUNDS; round++) {
    const id = `bench-${round}`
    const created = await call(agentA, a.base, 'POST', '/api/v1/admin/keys', API_KEY, { id, scopes: ['users:read'] })
    const secret = JSON.parse(created.body).secret as string
    while ((await call(agentB, b.base, 'GET', `/api/v1/user/${SYSTEM}/nobody`, secret)).status !== 404);
    await call(agentA, a.base, 'DELETE', `/api/v1/admin/keys/${id}`, API_KEY)
    const revokedAt = performance.now()
    for (;;) {
      probes++
      if ((await call(agentB, b.base, 'GET', `/api/v1/user/${SYSTEM}/nobody`, secret)).status === 401) break
    }
    times.push(performance.now() - revokedAt)
  }
} finally {
  load.stop()
  agentA.destroy()
  agentB.destroy()
  await stopServers()
  for (const teardown of teardowns.reverse()) await teardown()
  await sql.end()
  await admin.unsafe(`drop database if exists "${name}" with (force)`)
  await admin.end()
}

const sorted = [...times].sort((x, y) => x - y)
const ms = (value: number) => `${value.toFixed(1)} ms`
const body = [
  `${ROUNDS} revocations made on replica A while replica B served GET user at ${CONNECTIONS} connections;`,
  "time from A's answer to B's first 401 on a keep-alive connection that had used the key:",
  '',
  '| median | worst | best | target |',
  '|---|---|---|---|',
  `| ${ms(median(times))} | ${ms(sorted[sorted.length - 1]!)} | ${ms(sorted[0]!)} | within 1 s |`,
  '',
  `Requests B answered with the key after A had revoked it: ${probes - ROUNDS}.`,
].join('\n')
const file = writeResults('key-propagation', 'Key revocation across replicas', 'make bench-keys', body)
console.log(`${body}\n\nwritten to ${file}`)

// The stored keys' sync on its own, in this process, against a real database: what it makes of a
// row (systems, the body budget held to the process's range, the stored flag), the keys read at
// start with and without a LISTEN, a change committed elsewhere arriving by its notification, a
// LISTEN that cannot connect, and the use of a key written at most once per key and hour.
// The same across two server processes: test/scale/key-propagation.test.ts.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import postgres from 'postgres'
import type { FastifyBaseLogger } from 'fastify'
import { createApiKeyRegistry } from '../../src/auth/api-keys.js'
import { startStoredKeySync } from '../../src/auth/stored-key-sync.js'
import { type NewApiKey, createApiKeyRepository } from '../../src/repositories/api-keys.js'
import type { Sql } from '../../src/db/client.js'
import { createTestDatabase } from '../helpers/database.js'
import { sha256 } from '../helpers/keys.js'
import { waitFor } from '../helpers/wait.js'

const SYSTEM = '3f2c2f57-9d55-4a0b-8a3c-1c1f5b2f4e10'
const RANGE = { min: 1000, max: 5000 }
const HOUR_MS = 3_600_000

/** A logger that keeps its warnings. */
function recordingLog() {
  const warnings: { fields: unknown; message: unknown }[] = []
  const noop = () => {}
  const log = {
    warn: (fields: unknown, message: unknown) => warnings.push({ fields, message }),
    info: noop,
    error: noop,
    debug: noop,
    trace: noop,
    fatal: noop,
    child: () => log,
  }
  return { log: log as unknown as FastifyBaseLogger, warnings }
}

const db = await createTestDatabase(t)
const sql = db.sql as unknown as Sql
const repo = createApiKeyRepository(sql)

async function createKey(id: string, fields: Partial<NewApiKey> = {}): Promise<string> {
  const secret = `ssk_${id}_${randomUUID()}`
  await sql.begin((tx) =>
    createApiKeyRepository(tx as unknown as Sql).create(
      {
        id,
        partner: 'test',
        prefix: secret.slice(0, 8),
        digest: Buffer.from(sha256(secret), 'hex'),
        scopes: ['users:read'],
        systems: null,
        rateLimit: null,
        maxConcurrentRequests: null,
        maxBodyBytesInFlight: null,
        expiresAt: null,
        ...fields,
      },
      { keyId: 'test', requestId: randomUUID() },
    ),
  )
  return secret
}

const bounded = await createKey('bounded', { systems: [SYSTEM.toUpperCase()], maxBodyBytesInFlight: 2000 })
const below = await createKey('below', { maxBodyBytesInFlight: 10 })
const above = await createKey('above', { maxBodyBytesInFlight: 1_000_000 })
const unbounded = await createKey('unbounded')

t.test('without a LISTEN: every stored key is read at start, as the registry needs it', async (t) => {
  const registry = createApiKeyRegistry([])
  const { log } = recordingLog()
  const sync = await startStoredKeySync({ registry, keys: repo, log, bodyBytesRange: RANGE })
  const identity = registry.identify(bounded)
  t.ok(identity, 'a key in the table before the start is accepted')
  t.equal(identity!.id, 'bounded')
  t.equal(identity!.stored, true, 'marked stored (its use is recorded)')
  t.same([...identity!.systems!], [SYSTEM], 'its systems, lower-case')
  t.same([...identity!.scopes!], ['users:read'])
  t.same(
    [bounded, below, above, unbounded].map((secret) => registry.identify(secret)!.maxBodyBytesInFlight),
    [2000, RANGE.min, RANGE.max, null],
    'the body budget held to the range; none stays none',
  )
  t.equal(registry.identify('ssk_unknown'), null)
  await sync.close()
  t.pass('closes without a listener')
})

t.test('with a LISTEN: read at start, then a change committed elsewhere arrives', async (t) => {
  const registry = createApiKeyRegistry([])
  const { log } = recordingLog()
  const sync = await startStoredKeySync({ registry, keys: repo, log, listenWith: sql, bodyBytesRange: RANGE })
  t.teardown(() => sync.close())
  t.equal(registry.identify(unbounded)?.id, 'unbounded', 'read once the LISTEN is established')

  // Committed through another connection: only the notification tells this sync.
  const later = await createKey('later')
  await waitFor('the new key by its notification', () => registry.identify(later) !== null)
  t.equal(registry.identify(later)!.stored, true)
  const revoked = await sql.begin((tx) =>
    createApiKeyRepository(tx as unknown as Sql).revoke('later', { keyId: 'test', requestId: randomUUID() }, 'all'),
  )
  t.ok(revoked)
  await waitFor('the revocation by its notification', () => registry.identify(later) === null)
  t.ok(registry.identify(unbounded), 'the other keys stay')
})

t.test('a LISTEN that cannot connect does not hold up the start, and says so', async (t) => {
  const away = postgres('postgres://postgres@127.0.0.1:1/none', { max: 1, connect_timeout: 5 }) as unknown as Sql
  t.teardown(() => away.end({ timeout: 0 }))
  const registry = createApiKeyRegistry([])
  const { log, warnings } = recordingLog()
  const sync = await startStoredKeySync({ registry, keys: repo, log, listenWith: away, bodyBytesRange: RANGE })
  t.teardown(() => sync.close())
  const failed = warnings.find((w) => w.message === 'stored API keys: LISTEN failed; retrying')
  t.ok(failed, 'the failure is logged')
  t.ok((failed?.fields as { err?: unknown } | undefined)?.err instanceof Error, 'with its error')
})

t.test('a use is written at most once per key and hour', async (t) => {
  const calls: string[] = []
  const counted = {
    ...repo,
    markUsed: (keyId: string) => {
      calls.push(keyId)
      return repo.markUsed(keyId)
    },
  }
  const registry = createApiKeyRegistry([])
  const { log } = recordingLog()
  const sync = await startStoredKeySync({ registry, keys: counted, log, bodyBytesRange: RANGE })
  t.teardown(() => sync.close())
  const identity = registry.identify(unbounded)!
  const hour = Math.floor(Date.now() / HOUR_MS) * HOUR_MS
  sync.used(identity, hour + 1)
  sync.used(identity, hour + 2)
  sync.used(identity, hour + HOUR_MS - 1)
  t.same(calls, ['unbounded'], 'one write in an hour')
  sync.used(identity, hour + HOUR_MS)
  t.same(calls, ['unbounded', 'unbounded'], 'and one in the next')
  sync.used(registry.identify(bounded)!, hour + HOUR_MS)
  t.same(calls, ['unbounded', 'unbounded', 'bounded'], 'per key')
  await waitFor(
    'last_used_at',
    async () => (await sql`select 1 from api_keys where id = 'bounded' and last_used_at is not null`).length === 1,
  )
  t.pass('written to the table')
})

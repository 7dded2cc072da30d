// Migration 0009 scopes idempotency records by key id. A record stored before it (by an
// API_KEYS key, the only keys there were) still replays for API_KEYS keys until it expires,
// and never for a partner key of API_KEYS_FILE.
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { migrate } from '../../src/db/migrate.js'
import { requestHash } from '../../src/idempotency/request-hash.js'
import { projectRoot } from '../../src/paths.js'
import { createTestDatabase } from '../helpers/database.js'
import { writeKeyFile } from '../helpers/keys.js'
import { NO_LOAD_SHEDDING } from '../helpers/app.js'

t.test('a record stored before 0009 replays for API_KEYS keys after it, not for partner keys', async (t) => {
  const db = await createTestDatabase(t)
  await db.sql`drop schema public cascade`
  await db.sql`create schema public`
  const earlier = await mkdtemp(path.join(os.tmpdir(), 'migrations-'))
  t.teardown(() => rm(earlier, { recursive: true, force: true }))
  const all = path.join(projectRoot, 'db/migrations')
  for (const file of (await readdir(all)).filter((f) => f.endsWith('.sql') && f < '0009')) await copyFile(path.join(all, file), path.join(earlier, file))
  await migrate(db.sql, earlier)

  const body = { system_user_id: 'before-0009', system_uuid: '5b0d7a0e-6c1f-4c39-9a51-0f3c3f1b2a11', full_name: 'Stored Before' }
  const answer = JSON.stringify({ ...body, client_uuid: 'c5a1a1e2-3d4b-4c5d-8e6f-7a8b9c0d1e2f', username: null, timezone: 'UTC', is_row_invalid: 0, invalidation_reason_uuid: null, created_at: '2026-11-22T10:00:00.000Z', updated_at: '2026-11-22T10:00:00.000Z' })
  // As the service before 0009 stored it: no key id.
  await db.sql`insert into idempotency_records (scope, idempotency_key, request_hash, status_code, response_body, expires_at)
               values ('/api/v1/user', 'old-key', ${requestHash(body)}, 201, ${answer}, now() + interval '1 hour')`
  t.equal((await migrate(db.sql))[0], '0009_idempotency_key_id.sql', 'the upgrade applies 0009 (and what came after it)')
  const [row] = await db.sql`select key_id from idempotency_records where idempotency_key = 'old-key'`
  t.equal(row!.key_id, '', 'the old record has the empty key id')

  const config = loadConfig({ API_KEYS: 'plain-key', API_KEYS_FILE: await writeKeyFile(t, [{ id: 'acme', secret: 'ssk_acme' }]), LOG_LEVEL: 'silent', ...NO_LOAD_SHEDDING })
  const app = await buildApp({ config, sql: db.sql, logger: false })
  t.teardown(() => app.close())
  const send = (key: string) => app.inject({ method: 'POST', url: '/api/v1/user', payload: body, headers: { 'x-api-key': key, 'idempotency-key': 'old-key' } })

  const legacy = await send('plain-key')
  t.equal(legacy.statusCode, 201)
  t.equal(legacy.headers['idempotent-replayed'], 'true', 'the retry spanning the upgrade is a replay')
  t.equal(legacy.body, answer, 'the same bytes')
  const partner = await send('ssk_acme')
  t.equal(partner.statusCode, 201, 'the partner key does not see it: its own write runs')
  t.notOk(partner.headers['idempotent-replayed'])
  t.not(partner.json().client_uuid, JSON.parse(answer).client_uuid)

  // A replica of the previous version, still running during a rolling upgrade, inserts without key_id.
  await db.sql`insert into idempotency_records (scope, idempotency_key, request_hash, status_code, response_body, expires_at)
               values ('/api/v1/user', 'old-replica-key', 'h', 201, '{}', now() + interval '1 hour')`
  t.pass('an insert without key_id still works after 0009')
})

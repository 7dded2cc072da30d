// The spec decides who may call what: for every protected operation of spec/openapi.yaml,
// no key, a wrong key and an expired key get 401; a valid key without the operation's scope
// gets 403 SECURITY_SCOPE_MISSING (before the body is read or validated); a key with the
// scope gets past both checks. Every protected operation must name a scope.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { operations } from '../../generated/operations.js'
import { buildTestApp } from '../helpers/app.js'
import { writeKeyFile, type TestKey } from '../helpers/keys.js'

const protectedOps = Object.entries(operations).filter(([, op]) => !op.public && op.served)
const allScopes = [...new Set(protectedOps.flatMap(([, op]) => op.scopes as readonly string[]))]

t.test('every protected operation names at least one scope, all of them known', async (t) => {
  t.ok(protectedOps.length >= 14, `${protectedOps.length} protected operations`)
  for (const [id, op] of protectedOps) t.ok(op.scopes.length > 0, `${id} names a scope`)
  t.same(allScopes.sort(), [
    'keys:admin',
    'study:read',
    'study:write',
    'telemetry:erase',
    'telemetry:ingest',
    'telemetry:read',
    'users:erase',
    'users:export',
    'users:read',
    'users:write',
  ])
})

const keys: TestKey[] = [
  { id: 'expired', secret: 'ssk_expired', expires_at: '2020-01-01T00:00:00Z' },
  ...allScopes.map((scope) => ({
    id: `only-${scope.replace(':', '-')}`,
    secret: `ssk_only_${scope}`,
    scopes: [scope],
  })),
]
const api = await buildTestApp(t, { API_KEYS_FILE: await writeKeyFile(t, keys) })
const secretWithOnly = (scope: string) => `ssk_only_${scope}`

function urlOf(path: string) {
  return path
    .replace('{system_uuid}', randomUUID())
    .replace('{system_user_id}', 'matrix')
    .replace('{conspectus_uuid}', randomUUID())
}

for (const [id, op] of protectedOps) {
  t.test(`${op.method} ${op.path} (${id}, needs ${op.scopes.join(' or ')})`, async (t) => {
    const send = (key: string | null) =>
      api.request({ method: op.method as 'GET', url: urlOf(op.path), key, ...(op.bodySchema ? { payload: {} } : {}) })
    const expectError = async (key: string | null, status: number, errorKey: string, label: string) => {
      const res = await send(key)
      t.equal(res.statusCode, status, label)
      t.equal(res.json().key, errorKey, label)
    }
    await expectError(null, 401, 'SECURITY_AUTH_REQUIRED', 'no key')
    await expectError('ssk_wrong', 401, 'SECURITY_AUTH_REQUIRED', 'wrong key')
    await expectError('ssk_expired', 401, 'SECURITY_AUTH_REQUIRED', 'expired key')
    const other = allScopes.find((s) => !(op.scopes as readonly string[]).includes(s))!
    await expectError(secretWithOnly(other), 403, 'SECURITY_SCOPE_MISSING', `key with only ${other}`)
    const allowed = await send(secretWithOnly(op.scopes[0]!))
    t.notOk(
      [401, 403].includes(allowed.statusCode),
      `key with ${op.scopes[0]} passes the key and scope checks (got ${allowed.statusCode})`,
    )
  })
}

t.test('the scope check answers before the body size, content type and validation checks', async (t) => {
  const owner = urlOf('/api/v1/user/{system_uuid}/{system_user_id}')
  const big = await api.request({
    method: 'PUT',
    url: owner,
    key: secretWithOnly('users:read'),
    payload: 'x'.repeat(2_000_000),
    headers: { 'content-type': 'text/plain' },
  })
  t.equal(big.statusCode, 403, 'oversize text body without the scope: 403')
  const wrongType = await api.request({
    method: 'POST',
    url: '/api/v1/user',
    key: secretWithOnly('study:write'),
    payload: 'a',
    headers: { 'content-type': 'text/plain' },
  })
  t.equal(wrongType.statusCode, 403)
})

// One keep-alive connection may carry many clients' requests (a balancer reuses its connections
// to a replica): every request is judged by the key it carries itself, and an expired key stops
// working on a live connection.
import t from 'tap'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomUUID } from 'node:crypto'
import { createApiKeyRegistry } from '../../src/auth/api-keys.js'
import { parseKeyFile } from '../../src/auth/key-file.js'
import { buildTestApp } from '../helpers/app.js'
import { sha256, writeKeyFile } from '../helpers/keys.js'
import { waitFor } from '../helpers/wait.js'

t.test('registry: each lookup is judged by the candidate presented, expiry included', async (t) => {
  const registry = createApiKeyRegistry(
    ['legacy'],
    parseKeyFile(
      JSON.stringify([
        { id: 'acme', secret_sha256: sha256('ssk_acme'), expires_at: '2030-01-01T00:00:00Z' },
        { id: 'beta', secret_sha256: sha256('ssk_beta') },
      ]),
    ),
  )
  const before = Date.parse('2029-12-31T23:59:59Z')
  t.equal(registry.identify('ssk_acme', before)!.id, 'acme')
  t.equal(registry.identify('ssk_acme', before)!.id, 'acme', 'again')
  t.equal(registry.identify('ssk_beta', before)!.id, 'beta', 'another key')
  t.equal(registry.identify('ssk_acmf', before), null, 'a near miss')
  t.equal(registry.identify('ssk_acme', before)!.id, 'acme')
  t.equal(registry.identify('ssk_acme', Date.parse('2030-01-01T00:00:00Z')), null, 'expired')
  t.equal(registry.identify('ssk_beta', Date.parse('2030-01-01T00:00:00Z'))!.id, 'beta')
  t.equal(registry.identify('', before), null)
  t.equal(registry.identify(undefined, before), null)
  t.equal(registry.identify('legacy', before)!.scopes, null, 'an API_KEYS key has every scope')
})

t.test('HTTP: one keep-alive connection, several keys, each request judged by its own', async (t) => {
  // Long enough for the app to be built and the sequence to run before it, on a loaded CI
  // machine too (a database is created and migrated first); the test waits out the rest.
  const expiresAt = new Date(Date.now() + 15_000)
  const keyFile = await writeKeyFile(t, [
    { id: 'reader', secret: 'ssk_reader', scopes: ['users:read'] },
    { id: 'studier', secret: 'ssk_studier', scopes: ['study:read'] },
    { id: 'brief', secret: 'ssk_brief', scopes: ['users:read'], expires_at: expiresAt.toISOString() },
  ])
  const api = await buildTestApp(t, { API_KEYS_FILE: keyFile })
  await api.app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = api.app.server.address() as AddressInfo
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const localPorts = new Set<number>()
  const get = (key: string | null) =>
    new Promise<{ status: number; key: string }>((resolve, reject) => {
      const headers: Record<string, string> = key === null ? {} : { 'x-api-key': key }
      const req = http.get(
        { port, host: '127.0.0.1', agent, headers, path: `/api/v1/user/${randomUUID()}/nobody` },
        (res) => {
          localPorts.add(req.socket!.localPort!)
          let body = ''
          res.on('data', (chunk) => (body += chunk))
          res.on('end', () => resolve({ status: res.statusCode!, key: JSON.parse(body).key }))
        },
      )
      req.on('error', reject)
    })
  const sequence: [string | null, number, string][] = [
    ['ssk_reader', 404, 'USER_NOT_FOUND'],
    ['ssk_studier', 403, 'SECURITY_SCOPE_MISSING'],
    ['ssk_reader', 404, 'USER_NOT_FOUND'],
    ['ssk_readeR', 401, 'SECURITY_AUTH_REQUIRED'],
    [null, 401, 'SECURITY_AUTH_REQUIRED'],
    ['ssk_reader', 404, 'USER_NOT_FOUND'],
    ['ssk_brief', 404, 'USER_NOT_FOUND'],
  ]
  for (const [key, status, errorKey] of sequence)
    t.same(await get(key), { status, key: errorKey }, `${key ?? 'no key'}: ${status}`)
  // The brief key asked on the same connection until it is refused: a request every 500 ms keeps
  // the connection inside the server's keep-alive timeout. Before its expiry it is served.
  const refused = await waitFor(
    'the brief key to expire on the open connection',
    async () => {
      const asked = Date.now()
      const answer = await get('ssk_brief')
      if (answer.status === 404) return false
      if (asked < expiresAt.getTime()) throw new Error(`refused before its expiry: ${JSON.stringify(answer)}`)
      return answer
    },
    { everyMs: 500, timeoutMs: 60_000 },
  )
  t.same(refused, { status: 401, key: 'SECURITY_AUTH_REQUIRED' }, 'expired while its connection stayed open')
  t.same(await get('ssk_reader'), { status: 404, key: 'USER_NOT_FOUND' })
  t.equal(localPorts.size, 1, 'every request went over one connection')
})

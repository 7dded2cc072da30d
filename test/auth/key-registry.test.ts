// API keys: API_KEYS secrets and API_KEYS_FILE entries, their ids, expiry and rotation, and
// the one-line start-up errors for a malformed file.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { projectRoot } from '../../src/paths.js'
import { type ApiKeyIdentity, type StoredSecret, createApiKeyRegistry, legacyKeyId } from '../../src/auth/api-keys.js'
import { parseKeyFile } from '../../src/auth/key-file.js'
import { ConfigError, DEV_API_KEY, loadConfig } from '../../src/config.js'
import { makeKey } from '../../src/auth/make-key.js'
import { sha256, writeKeyFile, writeRawKeyFile } from '../helpers/keys.js'

const HASH = sha256('ssk_one')

t.test('API_KEYS secrets are full-access keys named key- + 12 hex of their SHA-256', async (t) => {
  const registry = createApiKeyRegistry(['alpha', 'beta'])
  const alpha = registry.identify('alpha')!
  t.equal(alpha.id, `key-${sha256('alpha').slice(0, 12)}`)
  t.equal(alpha.id, legacyKeyId('alpha'))
  t.same(
    { scopes: alpha.scopes, systems: alpha.systems, rateLimit: alpha.rateLimit },
    { scopes: null, systems: null, rateLimit: null },
  )
  t.not(registry.identify('beta')!.id, alpha.id)
  for (const wrong of ['alph', 'alpha ', '', undefined, 42, ['alpha']])
    t.equal(registry.identify(wrong), null, `refused: ${JSON.stringify(wrong)}`)
})

t.test('file entries: scopes, systems (lower-cased), rate limit, expiry, rotation by shared id', async (t) => {
  const A = randomUUID().toUpperCase()
  const entries = parseKeyFile(
    JSON.stringify([
      {
        id: 'acme',
        secret_sha256: sha256('old'),
        scopes: ['users:read'],
        systems: [A],
        rate_limit: { max: 5, window_ms: 1000 },
        expires_at: '2030-01-01T00:00:00Z',
      },
      {
        id: 'acme',
        secret_sha256: sha256('new').toUpperCase(),
        scopes: ['users:read'],
        systems: [A.toLowerCase()],
        rate_limit: { max: 5, window_ms: 1000 },
      },
    ]),
  )
  const registry = createApiKeyRegistry([], entries)
  const old = registry.identify('old')!
  t.equal(old.id, 'acme')
  t.same([...old.scopes!], ['users:read'])
  t.same([...old.systems!], [A.toLowerCase()])
  t.same(old.rateLimit, { max: 5, windowMs: 1000 })
  t.equal(registry.identify('new'), old, 'both secrets of a rotation are one identity')
  t.equal(registry.identify('old', Date.parse('2030-01-01T00:00:00Z')), null, 'expired at expires_at')
  t.equal(registry.identify('new', Date.parse('2031-01-01T00:00:00Z'))!.id, 'acme', 'the other secret keeps working')
})

t.test('a stored secret that answered before: revoked or rolled away, 401 at once; expiry per request', async (t) => {
  const registry = createApiKeyRegistry(['configured'])
  const identity: ApiKeyIdentity = Object.freeze({
    id: 'partner',
    scopes: new Set(['users:read']),
    systems: null,
    rateLimit: null,
    maxConcurrentRequests: null,
    maxBodyBytesInFlight: null,
    stored: true,
    partner: 'configured',
    fullAccess: false,
    expiresAt: null,
    partnerRoot: null,
  })
  const secret = (plain: string, expiresAt: number | null = null): StoredSecret => ({
    digest: Buffer.from(sha256(plain), 'hex'),
    expiresAt,
    identity,
  })
  const now = Date.parse('2030-01-01T00:00:00Z')
  registry.replaceStored([secret('ssk_first')])
  for (let i = 0; i < 3; i++) t.equal(registry.identify('ssk_first', now), identity, `answers (${i + 1})`)

  registry.replaceStoredKey('partner', [])
  t.equal(registry.identify('ssk_first', now), null, 'revoked: the next request is refused')

  registry.replaceStoredKey('partner', [secret('ssk_first'), secret('ssk_other')])
  t.equal(registry.identify('ssk_first', now), identity, 'issued again')
  registry.replaceStoredKey('partner', [secret('ssk_first', now + 1000), secret('ssk_second')])
  t.equal(registry.identify('ssk_first', now), identity, 'rolled: the old secret within its overlap')
  t.equal(registry.identify('ssk_first', now + 1000), null, 'and not from its expiry on')
  t.equal(registry.identify('ssk_first', now), identity, 'an expiry is checked per request, not remembered')
  t.equal(registry.identify('ssk_other', now), null, 'a secret the roll left out stops at once')
  registry.replaceStoredKey('partner', [secret('ssk_second')])
  t.equal(registry.identify('ssk_first', now), null, 'rolled away: refused at once')
  t.equal(registry.identify('ssk_second', now), identity)

  registry.replaceStored([])
  t.equal(registry.identify('ssk_second', now), null, 'a full re-read without the key: refused at once')
  t.equal(registry.identify('configured', now)!.id, legacyKeyId('configured'), 'configured keys are untouched')

  // A stored row under a configured key's id (the admin operations refuse such an id) is ignored:
  // it could otherwise give that id another secret.
  const shadow = (plain: string, id: string): StoredSecret => ({
    digest: Buffer.from(sha256(plain), 'hex'),
    expiresAt: null,
    identity: Object.freeze({ ...identity, id }),
  })
  registry.replaceStored([shadow('ssk_shadow', legacyKeyId('configured')), shadow('ssk_legacy_like', legacyKeyId('x'))])
  t.equal(registry.identify('ssk_shadow', now), null, "a stored secret under a configured key's id is refused")
  t.equal(registry.identify('ssk_legacy_like', now), null, 'and one under any id of the API_KEYS pattern')
  registry.replaceStoredKey(legacyKeyId('configured'), [shadow('ssk_shadow', legacyKeyId('configured'))])
  t.equal(registry.identify('ssk_shadow', now), null, 'also when one key is re-read')
  t.equal(registry.identify('configured', now)!.stored, false, 'the configured key stays what it was')
})

t.test('a malformed file stops the start with one line naming the entry and the problem', async (t) => {
  const ok = { id: 'acme', secret_sha256: HASH }
  const cases: [unknown, RegExp][] = [
    ['not json', /API_KEYS_FILE: not valid JSON/],
    [{ id: 'x' }, /must be a JSON array/],
    [[ok, 'x'], /entry 1: must be an object/],
    [[{ secret_sha256: HASH }], /entry 0: "id" must be/],
    [
      [{ id: 'key-0123456789ab', secret_sha256: HASH }],
      /entry 0 \(id "key-0123456789ab"\): "id" of the form key-<12 hex> is reserved/,
    ],
    [[{ id: 'acme', secret_sha256: 'abc' }], /entry 0 \(id "acme"\): "secret_sha256" must be 64 hex/],
    [[{ ...ok, scopes: ['users:delete'] }], /"scopes" has unknown scope "users:delete"/],
    [[{ ...ok, scopes: [] }], /"scopes" must be a non-empty array/],
    [[{ ...ok, systems: ['not-a-uuid'] }], /"systems" has "not-a-uuid", which is not a UUID/],
    [[{ ...ok, rate_limit: { max: 0, window_ms: 1000 } }], /"rate_limit.max" must be an integer/],
    [[{ ...ok, rate_limit: { max: 1 } }], /"rate_limit.window_ms" must be an integer/],
    [[{ ...ok, expires_at: 'tomorrow' }], /"expires_at" must be an RFC 3339 date-time/],
    [[{ ...ok, secret: 'plain' }], /unknown field "secret"/],
    [[ok, { id: 'other', secret_sha256: HASH }], /entry 1 \(id "other"\): same secret_sha256 as entry 0/],
    [
      [
        { ...ok, scopes: ['users:read'] },
        { id: 'acme', secret_sha256: sha256('b') },
      ],
      /entry 1 \(id "acme"\): "scopes" differs from entry 0 with the same id/,
    ],
    [
      [ok, { id: 'acme', secret_sha256: sha256('b'), systems: [randomUUID()] }],
      /entry 1 \(id "acme"\): "systems" differs/,
    ],
    [
      [ok, { id: 'acme', secret_sha256: sha256('b'), rate_limit: { max: 1, window_ms: 1 } }],
      /entry 1 \(id "acme"\): "rate_limit" differs/,
    ],
  ]
  for (const [content, message] of cases) {
    const file = await writeRawKeyFile(t, typeof content === 'string' ? content : JSON.stringify(content))
    const error = t.throws(
      () => loadConfig({ API_KEYS_FILE: file }),
      { constructor: ConfigError, message },
      String(message),
    ) as Error
    t.notMatch(error?.message ?? '', /\n/, 'one line')
  }
  t.throws(() => loadConfig({ API_KEYS_FILE: '/nonexistent/keys.json' }), {
    constructor: ConfigError,
    message: /API_KEYS_FILE: cannot read "\/nonexistent\/keys.json" \(ENOENT\)/,
  })
  const both = await writeKeyFile(t, [{ id: 'acme', secret: 'shared' }])
  t.throws(() => loadConfig({ API_KEYS: 'shared', API_KEYS_FILE: both }), {
    constructor: ConfigError,
    message: /configured twice/,
  })
})

t.test('API_KEYS_FILE alone is enough in qa and prod; no development key then', async (t) => {
  const file = await writeKeyFile(t, [{ id: 'acme', secret: 'ssk_x' }])
  for (const APP_ENV of ['qa', 'prod', 'dev']) {
    const config = loadConfig({ APP_ENV, API_KEYS_FILE: file, DATABASE_URL: 'postgres://db.example/study' })
    t.same(config.apiKeys, [], `${APP_ENV}: no plain keys`)
    t.equal(config.apiKeyEntries.length, 1)
  }
  t.same(loadConfig({}).apiKeys, [DEV_API_KEY], 'dev with no key at all: the development key')
})

t.test('make key: a prefixed 32-byte secret and an entry that the service accepts', async (t) => {
  const { secret, entry } = makeKey({ ID: 'acme', SCOPES: 'telemetry:ingest', RATE_MAX: '100', RATE_WINDOW_MS: '1000' })
  t.match(secret, /^ssk_[A-Za-z0-9_-]{43}$/)
  t.ok(Buffer.from(secret.slice(4), 'base64url').length >= 32)
  t.same(entry, {
    id: 'acme',
    secret_sha256: sha256(secret),
    scopes: ['telemetry:ingest'],
    rate_limit: { max: 100, window_ms: 1000 },
  })
  t.equal(createApiKeyRegistry([], parseKeyFile(JSON.stringify([entry]))).identify(secret)!.id, 'acme')
  t.not(makeKey({ ID: 'acme' }).secret, secret, 'random')
  t.throws(() => makeKey({ ID: 'acme', SCOPES: 'everything' }), /unknown scope/)
})

t.test(
  'make key as docs/partner-keys.md shows it: KEYS_FILE gets the entry appended, and starts the service',
  async (t) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'make-key-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    const doc = readFileSync(path.join(projectRoot, 'docs/partner-keys.md'), 'utf8')
    // The document's command, its variables taken as written.
    const command = /make key ((?:[A-Z_]+=\S+\s*\\?\s*)+)/.exec(doc)?.[1]
    t.ok(command, 'the document shows a make key command')
    const vars = Object.fromEntries([...command!.matchAll(/([A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]))
    t.equal(vars.KEYS_FILE, 'partner-keys.json')
    const run = (env: Record<string, string>) =>
      execFileSync(
        process.execPath,
        // The key maker as the service's build has it (make key runs dist/src/auth/make-key.js).
        [fileURLToPath(new URL('../../src/auth/make-key.js', import.meta.url))],
        {
          cwd: dir,
          env: { PATH: process.env.PATH, ...env },
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      )
    const first = run(vars)
    const second = run({ ...vars, ID: 'beta', EXPIRES_AT: '' })
    const secrets = [first, second].map((out) => /^(ssk_\S+)$/m.exec(out)?.[1])
    const text = readFileSync(path.join(dir, 'partner-keys.json'), 'utf8')
    const entries = JSON.parse(text)
    t.same(
      entries.map((e: { id: string }) => e.id),
      ['acme', 'beta'],
      'appended, in order',
    )
    // The document's shown file, with the digest filled in, is what make key wrote for acme.
    const shown = /`partner-keys.json` then holds[\s\S]*?```json\n([\s\S]*?)```/.exec(doc)?.[1]
    t.same(
      JSON.parse(shown!.replace('<64 hex>', entries[0].secret_sha256)),
      [entries[0]],
      'the document shows the file as written',
    )
    const config = loadConfig({
      APP_ENV: 'prod',
      API_KEYS_FILE: path.join(dir, 'partner-keys.json'),
      DATABASE_URL: 'postgres://db.example/study',
    })
    const registry = createApiKeyRegistry([], config.apiKeyEntries)
    t.same(
      secrets.map((s) => registry.identify(s!)?.id),
      ['acme', 'beta'],
      'both secrets identify their key',
    )
    t.throws(() => run({ ID: 'bad', SCOPES: 'everything', KEYS_FILE: 'partner-keys.json' }), 'a bad entry is refused')
    t.equal(readFileSync(path.join(dir, 'partner-keys.json'), 'utf8'), text, 'and leaves the file as it was')
  },
)

t.test("a stored key belongs to its partner's root and stops when the root's configured life ends", async (t) => {
  const ends = Date.parse('2030-01-01T00:00:00Z')
  const registry = createApiKeyRegistry(
    ['full'],
    parseKeyFile(
      JSON.stringify([
        { id: 'Root', secret_sha256: sha256('root-old'), expires_at: '2029-06-01T00:00:00Z' },
        { id: 'Root', secret_sha256: sha256('root-new'), expires_at: new Date(ends).toISOString() },
      ]),
    ),
  )
  const root = registry.partnerRoot('root')
  t.equal(root.id, 'Root', 'found without case')
  t.equal(root.expiresAt, ends, 'a configured id lives as long as its last secret')
  t.ok(registry.isConfiguredId('ROOT'))
  t.equal(registry.identify('full')!.fullAccess, true, 'an API_KEYS key acts on every key')
  t.equal(registry.identify('root-new')!.partner, 'Root', 'a configured key is its own root')
  const identity: ApiKeyIdentity = Object.freeze({
    id: 'child',
    scopes: new Set(['users:read']),
    systems: null,
    rateLimit: null,
    maxConcurrentRequests: null,
    maxBodyBytesInFlight: null,
    stored: true,
    partner: 'Root',
    fullAccess: false,
    expiresAt: null,
    partnerRoot: root,
  })
  registry.replaceStored([{ digest: Buffer.from(sha256('child'), 'hex'), expiresAt: null, identity }])
  t.equal(registry.identify('child', ends - 1), identity, 'in use while its root is')
  t.equal(registry.identify('child', ends), null, "stops at its root's expiry")
  const gone = registry.partnerRoot('removed')
  t.same(
    {
      id: gone.id,
      limits: [gone.rateLimit, gone.maxConcurrentRequests, gone.maxBodyBytesInFlight],
      expiresAt: gone.expiresAt,
    },
    { id: 'removed', limits: [null, null, null], expiresAt: null },
    "a root no longer configured: the service's defaults, shared by its keys",
  )
})

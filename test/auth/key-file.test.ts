// The API_KEYS_FILE parser at its edges: exact formats (anchored, bounded), values of the wrong
// JSON type, the defaults of an entry without scopes, the normalised entry a rotation compares,
// and the registry's refusals. The start-up path around it is in key-registry.test.ts.
import t, { type Test } from 'tap'
import { randomUUID } from 'node:crypto'
import { createApiKeyRegistry, DuplicateSecretError } from '../../src/auth/api-keys.js'
import { KeyFileError, parseKeyFile } from '../../src/auth/key-file.js'
import { sha256 } from '../helpers/keys.js'

const HASH = sha256('ssk_one')
const ok = { id: 'acme', secret_sha256: HASH }
const parseOne = (entry: Record<string, unknown>) => parseKeyFile(JSON.stringify([entry]))[0]!

/** Fails unless parsing the entry throws a KeyFileError whose message matches. */
function refuses(t: Test, entry: unknown, message: RegExp) {
  t.throws(() => parseKeyFile(JSON.stringify([entry])), { constructor: KeyFileError, message }, JSON.stringify(entry))
}

t.test('ids, secrets, systems and dates are checked whole, not by a prefix or a suffix', async (t) => {
  const long = `a${'b'.repeat(64)}`
  for (const id of ['acme!', '-acme', long]) refuses(t, { ...ok, id }, /"id" must be 1\.\.64 characters/)
  t.equal(parseOne({ ...ok, id: long.slice(0, 64) }).id, long.slice(0, 64), '64 characters are fine')
  // Only exactly key-<12 hex> is reserved.
  for (const id of ['key-0123456789abc', 'xkey-0123456789ab']) t.equal(parseOne({ ...ok, id }).id, id, `${id} is free`)
  for (const secret of [`${HASH}0`, `x${HASH}`, [HASH]])
    refuses(t, { ...ok, secret_sha256: secret }, /"secret_sha256" must be 64 hex characters/)
  const system = randomUUID()
  for (const s of [`${system}0`, `0${system}`]) refuses(t, { ...ok, systems: [s] }, /which is not a UUID/)
  // An array holding a date-time reads as one when turned into a string; a date without a zone
  // and an expanded year are valid for Date.parse, but not RFC 3339.
  for (const at of ['2030-01-01', '+002030-01-01T00:00:00Z', ['2030-01-01T00:00:00Z'], 1893456000000])
    refuses(t, { ...ok, expires_at: at }, /"expires_at" must be an RFC 3339 date-time/)
  t.equal(parseOne({ ...ok, expires_at: '2030-01-01T00:00:00+01:00' }).expiresAt, Date.parse('2029-12-31T23:00:00Z'))
  t.equal(
    parseOne({ ...ok, expires_at: '2030-01-01T00:00:00.5-05:30' }).expiresAt,
    Date.parse('2030-01-01T05:30:00.5Z'),
  )
})

t.test('values of the wrong JSON type are refused with the line for them', async (t) => {
  refuses(t, null, /API_KEYS_FILE: entry 0: must be an object/)
  for (const list of [[5], [null]]) refuses(t, { ...ok, scopes: list }, /"scopes" must contain only strings/)
  for (const rateLimit of [null, 5, [], 'x'])
    refuses(t, { ...ok, rate_limit: rateLimit }, /"rate_limit" must be an object \{max, window_ms\}/)
  refuses(t, { ...ok, rate_limit: { max: 1, window_ms: 1, burst: 2 } }, /unknown field "rate_limit\.burst"/)
})

t.test('integers are bounded at both ends, the bounds included', async (t) => {
  t.same(parseOne({ ...ok, rate_limit: { max: 10_000_000, window_ms: 86_400_000 } }).rateLimit, {
    max: 10_000_000,
    windowMs: 86_400_000,
  })
  refuses(
    t,
    { ...ok, rate_limit: { max: 10_000_001, window_ms: 1 } },
    /"rate_limit\.max" must be an integer from 1 to 10000000/,
  )
  refuses(t, { ...ok, rate_limit: { max: 1, window_ms: 86_400_001 } }, /"rate_limit\.window_ms" must be an integer/)
  t.equal(parseOne({ ...ok, max_concurrent_requests: 100_000 }).maxConcurrentRequests, 100_000)
  refuses(t, { ...ok, max_concurrent_requests: 100_001 }, /"max_concurrent_requests" must be an integer/)
  t.equal(parseOne({ ...ok, max_body_bytes_in_flight: 1_000_000 }).maxBodyBytesInFlight, 1_000_000)
  t.equal(parseOne(ok).maxBodyBytesInFlight, null, 'no limit of its own when absent')
  refuses(t, { ...ok, max_body_bytes_in_flight: 0 }, /"max_body_bytes_in_flight" must be an integer from 1/)
})

t.test('the lines name what was wrong, cut to 64 characters, and what is allowed', async (t) => {
  const long = 'z'.repeat(100)
  t.throws(() => parseKeyFile(JSON.stringify([{ ...ok, id: long }])), {
    message: `API_KEYS_FILE: entry 0 (id "${'z'.repeat(64)}"): "id" must be 1..64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit`,
  })
  refuses(
    t,
    { ...ok, secret: 'plain' },
    /unknown field "secret" \(allowed: id, secret_sha256, scopes, systems, rate_limit, max_concurrent_requests, max_body_bytes_in_flight, expires_at\)$/,
  )
  refuses(
    t,
    { ...ok, scopes: [long] },
    new RegExp(`has unknown scope "${'z'.repeat(64)}" \\(known: [^)]*\\busers:read\\b`),
  )
  refuses(t, { ...ok, systems: [long] }, new RegExp(`"systems" has "${'z'.repeat(64)}", which is not a UUID$`))
})

t.test('an entry without scopes has every scope but the erasing ones', async (t) => {
  t.same(parseOne(ok).scopes, [
    'study:read',
    'study:write',
    'telemetry:ingest',
    'telemetry:read',
    'users:export',
    'users:read',
    'users:write',
  ])
})

t.test('scopes and systems come out sorted and once each: a rotation may list them in any order', async (t) => {
  const [a, b] = [randomUUID(), randomUUID()].sort()
  const entry = parseOne({ ...ok, scopes: ['users:write', 'users:read', 'users:write'], systems: [b, a, b] })
  t.same(entry.scopes, ['users:read', 'users:write'])
  t.same(entry.systems, [a, b])
  const rotation = parseKeyFile(
    JSON.stringify([
      { ...ok, scopes: ['users:write', 'users:read'], systems: [b, a] },
      { ...ok, secret_sha256: sha256('ssk_two'), scopes: ['users:read', 'users:write'], systems: [a, b] },
    ]),
  )
  t.equal(rotation.length, 2, 'the same grants in another order are one rotation')
})

t.test('the registry: the file entry that repeats an API_KEYS secret is named; no key is empty', async (t) => {
  const [entry] = parseKeyFile(JSON.stringify([{ id: 'acme', secret_sha256: sha256('shared') }]))
  t.throws(() => createApiKeyRegistry(['shared'], [entry!]), {
    constructor: DuplicateSecretError,
    message: 'API_KEYS_FILE id "acme": the same secret is configured twice (API_KEYS and API_KEYS_FILE)',
  })
  // An entry made from an empty secret still never matches an empty header.
  const registry = createApiKeyRegistry([], parseKeyFile(JSON.stringify([{ id: 'empty', secret_sha256: sha256('') }])))
  t.equal(registry.size, 1)
  t.equal(registry.identify(''), null)
})

t.test('ids compare without case: two ids that differ only by case stop the start', async (t) => {
  t.throws(() => parseKeyFile(JSON.stringify([ok, { id: 'ACME', secret_sha256: sha256('ssk_two') }])), {
    constructor: KeyFileError,
    message: /entry 1 \(id "ACME"\): "id" differs from "acme" only by case/,
  })
})

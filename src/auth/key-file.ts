// Reads API_KEYS_FILE: a JSON array of key entries. Any problem stops the start with one line
// that names the entry (its index and id) and what is wrong with it.
import { hash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { isDeepStrictEqual } from 'node:util'
import { operations } from '../../generated/operations.js'

export interface RateLimitPolicy {
  max: number
  windowMs: number
}

/** One entry of API_KEYS_FILE, checked. Several entries may share an id (a rotation). */
export interface KeyFileEntry {
  id: string
  secretSha256: string
  /** the scopes granted; an entry without `scopes` has every scope but the explicit-only ones */
  scopes: string[]
  /** null: every system; else lower-cased system_uuids */
  systems: string[] | null
  rateLimit: RateLimitPolicy | null
  /** requests of this key in progress at once; null: CLIENT_MAX_CONCURRENT_REQUESTS */
  maxConcurrentRequests: number | null
  /** request-body bytes this key may hold in flight; null: CLIENT_MAX_BODY_BYTES_IN_FLIGHT */
  maxBodyBytesInFlight: number | null
  /** epoch ms; null: never expires */
  expiresAt: number | null
}

export class KeyFileError extends Error {}

/** Every scope some operation of the contract requires. */
export const KNOWN_SCOPES: ReadonlySet<string> = new Set(
  Object.values(operations).flatMap((op) => op.scopes as readonly string[]),
)

/**
 * Scopes an entry holds only when its `scopes` name them: erasing a visitor's telemetry or a learner is
 * not something a key written before the scope existed (no `scopes`: "everything") should gain.
 */
export const EXPLICIT_ONLY_SCOPES: ReadonlySet<string> = new Set(['telemetry:erase', 'users:erase', 'keys:admin'])
const DEFAULT_SCOPES = [...KNOWN_SCOPES].filter((s) => !EXPLICIT_ONLY_SCOPES.has(s)).sort()

const FIELDS = new Set([
  'id',
  'secret_sha256',
  'scopes',
  'systems',
  'rate_limit',
  'max_concurrent_requests',
  'max_body_bytes_in_flight',
  'expires_at',
])
/** A key id, in the file and in the database: 1..64 of A-Z a-z 0-9 . _ - from a letter or digit. */
export const KEY_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/
/** Ids of this form belong to API_KEYS secrets (`key-` + 12 hex of their SHA-256). */
export const LEGACY_ID = /^key-[0-9a-f]{12}$/i
const SHA256_HEX = /^[0-9a-f]{64}$/i
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
// RFC 3339 with a zone; Date.parse then gives the instant.
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i

function stringList(value: unknown, where: string, field: string, check: (item: string) => string | null): string[] {
  if (!Array.isArray(value) || value.length === 0)
    throw new KeyFileError(`${where}: "${field}" must be a non-empty array of strings`)
  return value.map((item) => {
    if (typeof item !== 'string') throw new KeyFileError(`${where}: "${field}" must contain only strings`)
    const problem = check(item)
    if (problem) throw new KeyFileError(`${where}: "${field}" ${problem}`)
    return item
  })
}

function positiveInteger(value: unknown, where: string, field: string, max: number): number {
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > max) {
    throw new KeyFileError(`${where}: "${field}" must be an integer from 1 to ${max}`)
  }
  return value as number
}

function parseEntry(raw: unknown, index: number): KeyFileEntry {
  let where = `entry ${index}`
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw new KeyFileError(`${where}: must be an object`)
  const e = raw as Record<string, unknown>
  if (typeof e.id === 'string') where = `entry ${index} (id "${e.id.slice(0, 64)}")`
  const unknown = Object.keys(e).filter((k) => !FIELDS.has(k))
  if (unknown.length > 0)
    throw new KeyFileError(`${where}: unknown field "${unknown[0]}" (allowed: ${[...FIELDS].join(', ')})`)
  if (typeof e.id !== 'string' || !KEY_ID.test(e.id))
    throw new KeyFileError(
      `${where}: "id" must be 1..64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit`,
    )
  if (LEGACY_ID.test(e.id))
    throw new KeyFileError(
      `${where}: "id" of the form key-<12 hex> is reserved for API_KEYS secrets; choose another id`,
    )
  if (typeof e.secret_sha256 !== 'string' || !SHA256_HEX.test(e.secret_sha256)) {
    throw new KeyFileError(
      `${where}: "secret_sha256" must be 64 hex characters (the SHA-256 of the secret; make key prints it)`,
    )
  }
  const scopes =
    e.scopes === undefined
      ? DEFAULT_SCOPES
      : stringList(e.scopes, where, 'scopes', (s) =>
          KNOWN_SCOPES.has(s) ? null : `has unknown scope "${s.slice(0, 64)}" (known: ${[...KNOWN_SCOPES].join(', ')})`,
        )
  const systems =
    e.systems === undefined
      ? null
      : stringList(e.systems, where, 'systems', (s) =>
          UUID.test(s) ? null : `has "${s.slice(0, 64)}", which is not a UUID`,
        ).map((s) => s.toLowerCase())
  let rateLimit: RateLimitPolicy | null = null
  if (e.rate_limit !== undefined) {
    const r = e.rate_limit as Record<string, unknown>
    if (r === null || typeof r !== 'object' || Array.isArray(r))
      throw new KeyFileError(`${where}: "rate_limit" must be an object {max, window_ms}`)
    const extra = Object.keys(r).filter((k) => k !== 'max' && k !== 'window_ms')
    if (extra.length > 0)
      throw new KeyFileError(`${where}: unknown field "rate_limit.${extra[0]}" (allowed: max, window_ms)`)
    rateLimit = {
      max: positiveInteger(r.max, where, 'rate_limit.max', 10_000_000),
      windowMs: positiveInteger(r.window_ms, where, 'rate_limit.window_ms', 86_400_000),
    }
  }
  // Same names as the columns of the keys table; whether a value fits the process-wide budget
  // is checked against the configuration (src/config.ts).
  const maxConcurrentRequests =
    e.max_concurrent_requests === undefined
      ? null
      : positiveInteger(e.max_concurrent_requests, where, 'max_concurrent_requests', 100_000)
  const maxBodyBytesInFlight =
    e.max_body_bytes_in_flight === undefined
      ? null
      : positiveInteger(e.max_body_bytes_in_flight, where, 'max_body_bytes_in_flight', Number.MAX_SAFE_INTEGER)
  let expiresAt: number | null = null
  if (e.expires_at !== undefined) {
    const at = typeof e.expires_at === 'string' && DATE_TIME.test(e.expires_at) ? Date.parse(e.expires_at) : Number.NaN
    if (!Number.isFinite(at))
      throw new KeyFileError(
        `${where}: "expires_at" must be an RFC 3339 date-time with a zone, e.g. 2027-01-31T00:00:00Z`,
      )
    expiresAt = at
  }
  return {
    id: e.id,
    secretSha256: e.secret_sha256.toLowerCase(),
    scopes: [...new Set(scopes)].sort(),
    systems: systems && [...new Set(systems)].sort(),
    rateLimit,
    maxConcurrentRequests,
    maxBodyBytesInFlight,
    expiresAt,
  }
}

/** The fields a rotation must keep, with their names in the file. */
const LABELS = [
  ['scopes', 'scopes'],
  ['systems', 'systems'],
  ['rateLimit', 'rate_limit'],
  ['maxConcurrentRequests', 'max_concurrent_requests'],
  ['maxBodyBytesInFlight', 'max_body_bytes_in_flight'],
] as const

/** Parses and checks the file's text; `name` is how the line names the file. */
export function parseKeyFile(text: string, name = 'API_KEYS_FILE'): KeyFileEntry[] {
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch {
    throw new KeyFileError(`${name}: not valid JSON`)
  }
  if (!Array.isArray(raw)) throw new KeyFileError(`${name}: must be a JSON array of key entries`)
  const entries: KeyFileEntry[] = []
  const firstOfId = new Map<string, { entry: KeyFileEntry; index: number }>()
  const secrets = new Map<string, number>()
  raw.forEach((item, index) => {
    let entry: KeyFileEntry
    try {
      entry = parseEntry(item, index)
    } catch (err) {
      throw err instanceof KeyFileError ? new KeyFileError(`${name}: ${err.message}`) : err
    }
    const where = `${name}: entry ${index} (id "${entry.id}")`
    const twin = secrets.get(entry.secretSha256)
    if (twin !== undefined) throw new KeyFileError(`${where}: same secret_sha256 as entry ${twin}`)
    secrets.set(entry.secretSha256, index)
    // A rotation keeps one identity: both secrets must grant exactly the same.
    const first = firstOfId.get(entry.id)
    const sameButCase = [...firstOfId.keys()].find(
      (id) => id !== entry.id && id.toLowerCase() === entry.id.toLowerCase(),
    )
    if (sameButCase !== undefined)
      throw new KeyFileError(`${where}: "id" differs from "${sameButCase}" only by case (ids compare without case)`)
    if (first) {
      for (const [field, label] of LABELS) {
        if (!isDeepStrictEqual(first.entry[field], entry[field])) {
          throw new KeyFileError(
            `${where}: "${label}" differs from entry ${first.index} with the same id (a rotation must grant the same)`,
          )
        }
      }
    } else {
      firstOfId.set(entry.id, { entry, index })
    }
    entries.push(entry)
  })
  return entries
}

/** Reads and parses the file at `path`. */
export function readKeyFile(path: string): KeyFileEntry[] {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    throw new KeyFileError(`API_KEYS_FILE: cannot read "${path}" (${(err as { code?: string }).code ?? 'error'})`)
  }
  return parseKeyFile(text)
}

/**
 * Refuses an API_KEYS secret that API_KEYS_FILE configures too (one secret, one key), naming the
 * file's entry; the key registry refuses the same when it is built.
 */
export function checkSecretsDistinct(legacySecrets: readonly string[], entries: readonly KeyFileEntry[]): void {
  const legacy = new Set(legacySecrets.map((secret) => hash('sha256', secret, 'hex')))
  for (const entry of entries)
    if (legacy.has(entry.secretSha256))
      throw new KeyFileError(
        `API_KEYS_FILE id "${entry.id}": the same secret is configured twice (API_KEYS and API_KEYS_FILE)`,
      )
}

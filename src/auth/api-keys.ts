// The key registry: who a presented X-API-Key is. The presented secret is hashed once with
// SHA-256 (to hex: Node's one-shot hash answers hex three times faster than a Buffer) and its
// digest looked up in a Map (O(1) in the number of keys); the stored digest is then compared
// with timingSafeEqual. A secret that matched is remembered with its entry (a bounded map, see
// `recent`), so its next requests skip the hash; unknown secrets are never held. Configured keys
// (API_KEYS, API_KEYS_FILE) are fixed at start; keys stored in the database are replaced, all or
// one key's at a time, by src/auth/stored-key-sync.ts whenever the table changes, and each
// replacement forgets every remembered secret, so a revoked or rolled secret answers 401 at once.
// Expiry is checked on every request, remembered or not.
import { hash, timingSafeEqual } from 'node:crypto'
import { type KeyFileEntry, LEGACY_ID, type RateLimitPolicy } from './key-file.js'

/** What a request's key is allowed; shared by every secret of one id (rotation). */
export interface ApiKeyIdentity {
  readonly id: string
  /** null: every scope */
  readonly scopes: ReadonlySet<string> | null
  /** null: every system; else lower-cased system_uuids */
  readonly systems: ReadonlySet<string> | null
  /** null: the default limit */
  readonly rateLimit: RateLimitPolicy | null
  /** null: the default (CLIENT_MAX_CONCURRENT_REQUESTS) */
  readonly maxConcurrentRequests: number | null
  /** null: the default (CLIENT_MAX_BODY_BYTES_IN_FLIGHT) */
  readonly maxBodyBytesInFlight: number | null
  /** true for a key stored in the database (its use is recorded in last_used_at) */
  readonly stored: boolean
  /** The partner the key belongs to: the id of its root configured key (its own id for a configured key). */
  readonly partner: string
  /** An API_KEYS key: acts on every key, of every partner. */
  readonly fullAccess: boolean
  /** When the key itself stops (epoch ms; a configured id: the last of its secrets); null: never. */
  readonly expiresAt: number | null
  /**
   * The partner's root key, whose limits the partner's keys share (src/http/client-holdings.ts,
   * the rate limit); null for a configured key, which is its own root.
   */
  readonly partnerRoot: ApiKeyIdentity | null
}

interface Secret {
  digest: Buffer
  identity: ApiKeyIdentity
  expiresAt: number | null
}

/** A usable secret of a stored key: its digest, when it stops, and what it grants. */
export interface StoredSecret {
  digest: Buffer
  expiresAt: number | null
  identity: ApiKeyIdentity
}

export interface ApiKeyRegistry {
  /** The identity of a configured or stored, unexpired secret, or null. */
  identify(candidate: unknown, now?: number): ApiKeyIdentity | null
  /** Number of configured secrets. */
  readonly size: number
  /** Whether `id` (compared without case) belongs to a configured key, or has the id form of API_KEYS keys. */
  isConfiguredId(id: string): boolean
  /**
   * The root of partner `id`: its configured key, or (no longer configured) a root with the
   * service's defaults, so that the partner's keys still share one budget.
   */
  partnerRoot(id: string): ApiKeyIdentity
  /** Every stored key's secrets, replacing all (after (re)connecting to the change channel). */
  replaceStored(secrets: readonly StoredSecret[]): void
  /** One stored key's secrets now (none: revoked, expired or gone), replacing what it had. */
  replaceStoredKey(keyId: string, secrets: readonly StoredSecret[]): void
}

// One-shot hashing: no Hash object per request.
const sha256 = (value: string) => hash('sha256', value, 'buffer') as unknown as Buffer

/** The id of an API_KEYS secret: `key-` + the first 12 hex characters of its SHA-256. */
export const legacyKeyId = (secret: string) => `key-${sha256(secret).toString('hex').slice(0, 12)}`

export class DuplicateSecretError extends Error {}

/** At most this many remembered secrets (partners' keys in use are far fewer); full, it starts over. */
const RECENT_LIMIT = 1024

export function createApiKeyRegistry(
  legacySecrets: readonly string[],
  entries: readonly KeyFileEntry[] = [],
): ApiKeyRegistry {
  const secrets = new Map<string, Secret>()
  const add = (hex: string, secret: Secret, label: string) => {
    if (secrets.has(hex))
      throw new DuplicateSecretError(`${label}: the same secret is configured twice (API_KEYS and API_KEYS_FILE)`)
    secrets.set(hex, secret)
  }
  for (const plain of new Set(legacySecrets)) {
    const digest = sha256(plain)
    const identity: ApiKeyIdentity = Object.freeze({
      id: legacyKeyId(plain),
      scopes: null,
      systems: null,
      rateLimit: null,
      maxConcurrentRequests: null,
      maxBodyBytesInFlight: null,
      stored: false,
      partner: legacyKeyId(plain),
      fullAccess: true,
      expiresAt: null,
      partnerRoot: null,
    })
    add(digest.toString('hex'), { digest, identity, expiresAt: null }, `API_KEYS key ${identity.id}`)
  }
  // Keyed by the lower-cased id: ids compare without case.
  const identities = new Map<string, ApiKeyIdentity>()
  for (const { identity } of secrets.values()) identities.set(identity.id.toLowerCase(), identity)
  // A configured id lives as long as its longest-lived secret (a rotation's entries may differ).
  const lives = new Map<string, number | null>()
  for (const entry of entries) {
    const before = lives.get(entry.id)
    lives.set(
      entry.id,
      before === null || entry.expiresAt === null ? null : Math.max(before ?? entry.expiresAt, entry.expiresAt),
    )
  }
  for (const entry of entries) {
    let identity = identities.get(entry.id.toLowerCase())
    if (!identity) {
      identity = Object.freeze({
        id: entry.id,
        scopes: new Set(entry.scopes),
        systems: entry.systems && new Set(entry.systems),
        rateLimit: entry.rateLimit,
        maxConcurrentRequests: entry.maxConcurrentRequests,
        maxBodyBytesInFlight: entry.maxBodyBytesInFlight,
        stored: false,
        partner: entry.id,
        fullAccess: false,
        expiresAt: lives.get(entry.id)!,
        partnerRoot: null,
      })
      identities.set(entry.id.toLowerCase(), identity)
    }
    add(
      entry.secretSha256,
      { digest: Buffer.from(entry.secretSha256, 'hex'), identity, expiresAt: entry.expiresAt },
      `API_KEYS_FILE id "${entry.id}"`,
    )
  }

  // Stored keys: by digest for the lookup, and each key's digests to replace them by key.
  let stored = new Map<string, Secret>()
  let storedByKey = new Map<string, string[]>()
  const isConfiguredId = (id: string) => identities.has(id.toLowerCase()) || LEGACY_ID.test(id)
  const absentRoots = new Map<string, ApiKeyIdentity>()
  const partnerRoot = (id: string): ApiKeyIdentity => {
    const configured = identities.get(id.toLowerCase())
    if (configured) return configured
    let absent = absentRoots.get(id)
    if (!absent) {
      absent = Object.freeze({
        id,
        scopes: new Set<string>(),
        systems: null,
        rateLimit: null,
        maxConcurrentRequests: null,
        maxBodyBytesInFlight: null,
        stored: false,
        partner: id,
        fullAccess: false,
        expiresAt: null,
        partnerRoot: null,
      })
      absentRoots.set(id, absent)
    }
    return absent
  }
  const addStored = (secret: StoredSecret) => {
    const hex = secret.digest.toString('hex')
    // A stored key never shadows a configured one (the admin operations refuse such an id).
    if (isConfiguredId(secret.identity.id) || secrets.has(hex)) return
    stored.set(hex, secret)
    const digests = storedByKey.get(secret.identity.id)
    if (digests) digests.push(hex)
    else storedByKey.set(secret.identity.id, [hex])
  }

  const lookup = (candidate: string): Secret | null => {
    const hex = hash('sha256', candidate, 'hex')
    const found = secrets.get(hex) ?? stored.get(hex)
    return found && timingSafeEqual(Buffer.from(hex, 'hex'), found.digest) ? found : null
  }
  // Presented secrets that matched, with their entry: the entry is a pure function of the secret
  // until the stored keys change, and every change below starts this map afresh. (A Map compares
  // a candidate's text only with an entry of the same hash, under V8's per-process seed: a guess
  // learns nothing from its timing.)
  let recent = new Map<string, Secret>()
  const remembered = (candidate: string): Secret | null => {
    let found = recent.get(candidate)
    if (found === undefined) {
      const looked = lookup(candidate)
      if (looked === null) return null
      if (recent.size >= RECENT_LIMIT) recent = new Map()
      recent.set(candidate, looked)
      found = looked
    }
    return found
  }

  return {
    size: secrets.size,
    isConfiguredId,
    partnerRoot,
    replaceStored(all) {
      recent = new Map()
      stored = new Map()
      storedByKey = new Map()
      for (const secret of all) addStored(secret)
    },
    replaceStoredKey(keyId, keySecrets) {
      recent = new Map()
      for (const hex of storedByKey.get(keyId) ?? []) stored.delete(hex)
      storedByKey.delete(keyId)
      for (const secret of keySecrets) addStored(secret)
    },
    identify(candidate, now = Date.now()) {
      if (typeof candidate !== 'string' || candidate.length === 0) return null
      const found = remembered(candidate)
      // Expired answers exactly like unknown: the caller learns nothing about the key.
      if (!found || (found.expiresAt !== null && found.expiresAt <= now)) return null
      // A stored key stops with its partner's root, whenever the root's configured life ends.
      const root = found.identity.partnerRoot
      if (root !== null && root.expiresAt !== null && root.expiresAt <= now) return null
      return found.identity
    },
  }
}

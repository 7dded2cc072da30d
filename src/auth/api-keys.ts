// The key registry: who a presented X-API-Key is. The presented secret is hashed once with
// SHA-256 and its digest looked up in a Map (O(1) in the number of keys); the stored digest is
// then compared with timingSafeEqual. Only digests are kept in memory, never the secrets: a
// presented secret lives no longer than its request.
import { hash, timingSafeEqual } from 'node:crypto'
import type { KeyFileEntry, RateLimitPolicy } from './key-file.js'

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
}

interface Secret {
  digest: Buffer
  identity: ApiKeyIdentity
  expiresAt: number | null
}

export interface ApiKeyRegistry {
  /** The identity of a configured, unexpired secret, or null. */
  identify(candidate: unknown, now?: number): ApiKeyIdentity | null
  /** Number of secrets. */
  readonly size: number
}

// One-shot hashing: no Hash object per request.
const sha256 = (value: string) => hash('sha256', value, 'buffer') as unknown as Buffer

/** The id of an API_KEYS secret: `key-` + the first 12 hex characters of its SHA-256. */
export const legacyKeyId = (secret: string) => `key-${sha256(secret).toString('hex').slice(0, 12)}`

export class DuplicateSecretError extends Error {}

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
    })
    add(digest.toString('hex'), { digest, identity, expiresAt: null }, `API_KEYS key ${identity.id}`)
  }
  const identities = new Map<string, ApiKeyIdentity>()
  for (const entry of entries) {
    let identity = identities.get(entry.id)
    if (!identity) {
      identity = Object.freeze({
        id: entry.id,
        scopes: new Set(entry.scopes),
        systems: entry.systems && new Set(entry.systems),
        rateLimit: entry.rateLimit,
        maxConcurrentRequests: entry.maxConcurrentRequests,
        maxBodyBytesInFlight: entry.maxBodyBytesInFlight,
      })
      identities.set(entry.id, identity)
    }
    add(
      entry.secretSha256,
      { digest: Buffer.from(entry.secretSha256, 'hex'), identity, expiresAt: entry.expiresAt },
      `API_KEYS_FILE id "${entry.id}"`,
    )
  }

  const lookup = (candidate: string): Secret | null => {
    const probe = sha256(candidate)
    const found = secrets.get(probe.toString('hex'))
    return found && timingSafeEqual(probe, found.digest) ? found : null
  }

  return {
    size: secrets.size,
    identify(candidate, now = Date.now()) {
      if (typeof candidate !== 'string' || candidate.length === 0) return null
      const found = lookup(candidate)
      // Expired answers exactly like unknown: the caller learns nothing about the key.
      if (!found || (found.expiresAt !== null && found.expiresAt <= now)) return null
      return found.identity
    },
  }
}

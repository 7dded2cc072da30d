// API-key check in constant time: the candidate is hashed and compared with every configured
// key's hash by timingSafeEqual, without stopping at the first match.
import { hash, timingSafeEqual } from 'node:crypto'

// One-shot hashing: no Hash object per request.
const digest = (value: string) => hash('sha256', value, 'buffer') as unknown as Buffer

export interface ApiKeyVerifier {
  /** A stable, non-secret id of the matching key (`key-1`, ...), or null. */
  identify(candidate: unknown): string | null
}

export function createApiKeyVerifier(keys: readonly string[]): ApiKeyVerifier {
  const digests = keys.map(digest)
  return {
    identify(candidate) {
      if (typeof candidate !== 'string' || candidate.length === 0) return null
      const probe = digest(candidate)
      let match = -1
      for (let i = 0; i < digests.length; i++) {
        if (timingSafeEqual(probe, digests[i]!) && match === -1) match = i
      }
      return match === -1 ? null : `key-${match + 1}`
    },
  }
}

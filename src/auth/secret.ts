// A new partner secret: 32 random bytes as base64url behind the `ssk_` prefix (recognisable in
// a leaked file or by a secret scanner). What is kept of it is its SHA-256 and its first
// characters (to tell keys apart in a list); the secret itself only travels to its holder.
import { createHash, randomBytes } from 'node:crypto'

export const SECRET_PREFIX = 'ssk_'
/** How much of a secret a list shows: the prefix and 4 random characters. */
const DISPLAY_LENGTH = SECRET_PREFIX.length + 4

export interface IssuedSecret {
  secret: string
  digest: Buffer
  prefix: string
}

export function issueSecret(): IssuedSecret {
  const secret = SECRET_PREFIX + randomBytes(32).toString('base64url')
  return { secret, digest: createHash('sha256').update(secret).digest(), prefix: secret.slice(0, DISPLAY_LENGTH) }
}

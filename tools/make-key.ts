// Makes a partner API key: a random 32-byte secret with the `ssk_` prefix (recognisable in a
// leaked file or a secret scanner), printed once, and the API_KEYS_FILE entry holding only its
// SHA-256. Usage: make key ID=acme [SCOPES=users:read,study:read] [SYSTEMS=<uuid>,...]
//                 [RATE_MAX=1000 RATE_WINDOW_MS=60000] [MAX_CONCURRENT_REQUESTS=64]
//                 [MAX_BODY_BYTES_IN_FLIGHT=4194304] [EXPIRES_AT=2027-01-31T00:00:00Z]
// The entry is checked by the same rules as the service's start-up.
import { createHash, randomBytes } from 'node:crypto'
import { parseKeyFile } from '../src/auth/key-file.js'

export const SECRET_PREFIX = 'ssk_'

export function makeKey(env: NodeJS.ProcessEnv): { secret: string; entry: Record<string, unknown> } {
  const secret = SECRET_PREFIX + randomBytes(32).toString('base64url')
  const list = (raw: string | undefined) =>
    (raw ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
  const entry: Record<string, unknown> = {
    id: env.ID ?? '',
    secret_sha256: createHash('sha256').update(secret).digest('hex'),
  }
  if (list(env.SCOPES).length > 0) entry.scopes = list(env.SCOPES)
  if (list(env.SYSTEMS).length > 0) entry.systems = list(env.SYSTEMS)
  if (env.RATE_MAX || env.RATE_WINDOW_MS)
    entry.rate_limit = { max: Number(env.RATE_MAX ?? 1000), window_ms: Number(env.RATE_WINDOW_MS ?? 60_000) }
  if (env.MAX_CONCURRENT_REQUESTS) entry.max_concurrent_requests = Number(env.MAX_CONCURRENT_REQUESTS)
  if (env.MAX_BODY_BYTES_IN_FLIGHT) entry.max_body_bytes_in_flight = Number(env.MAX_BODY_BYTES_IN_FLIGHT)
  if (env.EXPIRES_AT) entry.expires_at = env.EXPIRES_AT
  parseKeyFile(JSON.stringify([entry]), 'key')
  return { secret, entry }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  try {
    const { secret, entry } = makeKey(process.env)
    process.stdout.write(
      `secret (give it to the partner once; it is not stored anywhere):\n${secret}\n\nentry for API_KEYS_FILE:\n${JSON.stringify(entry)}\n`,
    )
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`)
    process.exit(1)
  }
}

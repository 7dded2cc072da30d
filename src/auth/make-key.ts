// Makes a partner API key: a random 32-byte secret with the `ssk_` prefix (recognisable in a
// leaked file or a secret scanner), printed once, and the API_KEYS_FILE entry holding only its
// SHA-256. Usage: make key ID=acme [SCOPES=users:read,study:read] [SYSTEMS=<uuid>,...]
//                 [RATE_MAX=1000 RATE_WINDOW_MS=60000] [MAX_CONCURRENT_REQUESTS=64]
//                 [MAX_BODY_BYTES_IN_FLIGHT=4194304] [EXPIRES_AT=2027-01-31T00:00:00Z]
//                 [KEYS_FILE=partner-keys.json]
// Without KEYS_FILE it prints a whole API_KEYS_FILE holding the one entry; with it, the entry is
// appended to that file's array (the file is created when missing). Checked by the same rules as
// the service's start-up.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { parseKeyFile } from './key-file.js'
import { issueSecret } from './secret.js'

export function makeKey(env: NodeJS.ProcessEnv): { secret: string; entry: Record<string, unknown> } {
  const { secret, digest } = issueSecret()
  const list = (raw: string | undefined) =>
    (raw ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
  const entry: Record<string, unknown> = {
    id: env.ID ?? '',
    secret_sha256: digest.toString('hex'),
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

/** An API_KEYS_FILE's text: a JSON array, one entry per line. */
export function keyFileText(entries: Record<string, unknown>[]): string {
  return `[\n${entries.map((e) => `  ${JSON.stringify(e)}`).join(',\n')}\n]\n`
}

/** The file's entries with `entry` appended, checked as the service checks it at start. */
export function appendToKeyFile(file: string, entry: Record<string, unknown>): Record<string, unknown>[] {
  const entries: Record<string, unknown>[] = existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) : []
  if (!Array.isArray(entries)) throw new Error(`${file} is not a JSON array`)
  const next = [...entries, entry]
  parseKeyFile(JSON.stringify(next), file)
  writeFileSync(`${file}.tmp`, keyFileText(next))
  renameSync(`${file}.tmp`, file)
  return next
}

if (import.meta.url === `file://${process.argv[1]}`) {
  try {
    const { secret, entry } = makeKey(process.env)
    const file = process.env.KEYS_FILE
    const where = file
      ? `appended to ${file} (${appendToKeyFile(file, entry).length} entries); its new entry:\n${keyFileText([entry])}`
      : `API_KEYS_FILE with this one entry (or run with KEYS_FILE=<file> to append it to a file):\n${keyFileText([entry])}`
    process.stdout.write(`secret (give it to the partner once; it is not stored anywhere):\n${secret}\n\n${where}`)
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`)
    process.exit(1)
  }
}

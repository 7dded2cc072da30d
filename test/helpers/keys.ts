// Partner keys for tests: writes an API_KEYS_FILE of entries made from plain secrets.
import { createHash } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import type { Test } from 'tap'

export interface TestKey {
  id: string
  secret: string
  scopes?: string[]
  systems?: string[]
  rate_limit?: { max: number; window_ms: number }
  max_concurrent_requests?: number
  max_body_bytes_in_flight?: number
  expires_at?: string
}

export const sha256 = (secret: string) => createHash('sha256').update(secret).digest('hex')

/** The API_KEYS_FILE entry of a test key (its secret only as SHA-256). */
export function fileEntry({ secret, ...rest }: TestKey): Record<string, unknown> {
  const { id, ...options } = rest
  return { id, secret_sha256: sha256(secret), ...options }
}

/** Writes the keys to a temporary API_KEYS_FILE; returns its path. */
export function writeKeyFile(t: Test, keys: TestKey[]): Promise<string> {
  return writeRawKeyFile(t, JSON.stringify(keys.map(fileEntry)))
}

/** Writes `text` as a temporary API_KEYS_FILE; returns its path. */
export async function writeRawKeyFile(t: Test, text: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'keys-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const file = path.join(dir, 'keys.json')
  await writeFile(file, text)
  return file
}

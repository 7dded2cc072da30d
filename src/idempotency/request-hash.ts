// SHA-256 over canonical JSON: object keys sorted recursively, no whitespace, arrays in order.
import { createHash } from 'node:crypto'
import { configure } from 'safe-stable-stringify'

const canonicalJson = configure({ deterministic: true, bigint: false })

export function requestHash(body: unknown): string {
  return createHash('sha256').update(canonicalJson(body ?? null) ?? 'null').digest('hex')
}

// SHA-256 over canonical JSON: object keys sorted recursively, no whitespace, arrays in order.
import { hash } from 'node:crypto'
import { configure } from 'safe-stable-stringify'

const canonicalJson = configure({ deterministic: true, bigint: false })

// One-shot hashing: no Hash object per request.
export function requestHash(body: unknown): string {
  return hash('sha256', canonicalJson(body ?? null) ?? 'null', 'hex')
}

// The IETF rate-limit fields (draft-ietf-httpapi-ratelimit-headers): structured-field Lists of
// one Item, the policy named "default", serialized by structured-headers.
import { serializeList } from 'structured-headers'

const POLICY = 'default'
// Largest structured-field Integer (15 digits).
const SF_INTEGER_MAX = 999_999_999_999_999

const isSfInteger = (n: number) => Number.isInteger(n) && n >= 0 && n <= SF_INTEGER_MAX

/** `"default";q=<max>;w=<window seconds>` (a few per process: the caller caches it). */
export function rateLimitPolicy(max: number, windowMs: number): string {
  return serializeList([
    [
      POLICY,
      new Map([
        ['q', max],
        ['w', Math.ceil(windowMs / 1000)],
      ]),
    ],
  ])
}

/**
 * `"default";r=<remaining>;t=<seconds until a request frees>`, on every limited answer. For two
 * non-negative sf-integers the serialization is exactly this text, so it is written directly
 * (building the library's Map and List per request was a measurable share of a request's CPU);
 * anything else goes through structured-headers. A test holds the two to the same output.
 */
export function rateLimit(remaining: number, resetSeconds: number): string {
  if (isSfInteger(remaining) && isSfInteger(resetSeconds)) return `"${POLICY}";r=${remaining};t=${resetSeconds}`
  return serializeList([
    [
      POLICY,
      new Map([
        ['r', remaining],
        ['t', resetSeconds],
      ]),
    ],
  ])
}

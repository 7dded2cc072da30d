// The IETF rate-limit fields (draft-ietf-httpapi-ratelimit-headers): structured-field Lists of
// one Item, the policy named "default", serialized by structured-headers.
import { serializeList } from 'structured-headers'

const POLICY = 'default'

/** `"default";q=<max>;w=<window seconds>` */
export function rateLimitPolicy(max: number, windowMs: number): string {
  return serializeList([[POLICY, new Map([['q', max], ['w', Math.ceil(windowMs / 1000)]])]])
}

/** `"default";r=<remaining>;t=<seconds until a request frees>` */
export function rateLimit(remaining: number, resetSeconds: number): string {
  return serializeList([[POLICY, new Map([['r', remaining], ['t', resetSeconds]])]])
}

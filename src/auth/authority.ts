// Authority only narrows. What a key holds, resolved against the service's defaults; what a key
// it creates may hold (never more, in anything); and which keys it may see and act on (those of
// its own partner it could have created). An API_KEYS key holds everything and reaches every key.
import type { ApiKeyIdentity } from './api-keys.js'
import { EXPLICIT_ONLY_SCOPES, KNOWN_SCOPES } from './key-file.js'
import { appError } from '../errors.js'
import type { Grant, HeldLimits, RateQuota, Reach } from '../repositories/api-keys.js'
import type { components } from '../../generated/api.js'

/** The service's defaults for a key that sets no limit of its own. */
export interface KeyDefaults {
  rate: RateQuota
  maxConcurrentRequests: number
  maxBodyBytesInFlight: number
}

/** What a key holds, every limit resolved. */
export function heldLimits(key: ApiKeyIdentity, defaults: KeyDefaults): HeldLimits {
  return {
    scopes: [...(key.scopes ?? KNOWN_SCOPES)],
    systems: key.systems && [...key.systems],
    rate: key.rateLimit ?? defaults.rate,
    maxConcurrentRequests: key.maxConcurrentRequests ?? defaults.maxConcurrentRequests,
    maxBodyBytesInFlight: key.maxBodyBytesInFlight ?? defaults.maxBodyBytesInFlight,
    expiresAt: key.expiresAt === null ? null : new Date(key.expiresAt),
  }
}

/** The keys `actor` may see and act on. */
export function reachOf(actor: ApiKeyIdentity, defaults: KeyDefaults): Reach {
  return actor.fullAccess ? 'all' : { partner: actor.partner, limits: heldLimits(actor, defaults), defaults }
}

/** A rate within another: no larger burst (max) and no higher long-run rate (max per window). */
export const rateWithin = (rate: RateQuota, held: RateQuota) =>
  rate.max <= held.max && rate.max * held.windowMs <= held.max * rate.windowMs

/** What a create asks for: the request body's fields but the new key's id. */
export type AskedGrant = Omit<components['schemas']['ApiKeyCreateRequest'], 'id'>

/**
 * What a new key grants: what was asked for, and for anything not asked, what its creator holds
 * (its scopes without the explicit-only ones, its systems, limits and expiry). Anything beyond
 * the creator's is 403 KEYS_403, with a key that names the field.
 */
export function grantOf(creator: ApiKeyIdentity, asked: AskedGrant, defaults: KeyDefaults): Grant {
  const held = heldLimits(creator, defaults)
  const heldScopes = new Set(held.scopes)
  const scopes = asked.scopes ?? held.scopes.filter((scope) => !EXPLICIT_ONLY_SCOPES.has(scope))
  if (!scopes.every((scope) => heldScopes.has(scope))) throw appError('ADMIN_KEY_GRANT_NOT_HELD')
  const systemsAsked = asked.systems?.map((system) => system.toLowerCase())
  if (systemsAsked && creator.systems && !systemsAsked.every((system) => creator.systems!.has(system)))
    throw appError('ADMIN_KEY_GRANT_NOT_HELD')
  const systems = systemsAsked ?? held.systems

  const rate = asked.rate_limit
  if (rate && !rateWithin({ max: rate.max, windowMs: rate.window_ms }, held.rate))
    throw appError('ADMIN_KEY_RATE_LIMIT_NOT_HELD')
  const concurrency = asked.max_concurrent_requests
  if (concurrency !== undefined && concurrency > held.maxConcurrentRequests)
    throw appError('ADMIN_KEY_CONCURRENCY_NOT_HELD')
  const bytes = asked.max_body_bytes_in_flight
  if (bytes !== undefined && bytes > held.maxBodyBytesInFlight) throw appError('ADMIN_KEY_BODY_BYTES_NOT_HELD')
  const expiresAt = asked.expires_at === undefined ? undefined : new Date(asked.expires_at)
  if (expiresAt && held.expiresAt && expiresAt > held.expiresAt) throw appError('ADMIN_KEY_EXPIRY_NOT_HELD')

  return {
    scopes: [...new Set(scopes)].sort(),
    systems: systems && [...new Set(systems)].sort(),
    rateLimit: rate ?? (creator.rateLimit && { max: creator.rateLimit.max, window_ms: creator.rateLimit.windowMs }),
    maxConcurrentRequests: concurrency ?? creator.maxConcurrentRequests,
    maxBodyBytesInFlight: bytes ?? creator.maxBodyBytesInFlight,
    expiresAt: (expiresAt ?? held.expiresAt)?.toISOString() ?? null,
  }
}

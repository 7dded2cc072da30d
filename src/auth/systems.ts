// Object-level authorisation by system: a key bound to systems may only name those
// system_uuids, wherever the request names one (path, query, body; a new value in PUT/PATCH
// included). Decided from the validated request alone, before any lookup, so the answer is
// the same whether or not anything exists under the other system.
import type { FastifyRequest, preHandlerHookHandler } from 'fastify'
import { appError } from '../errors.js'

export type SystemUuidPart = 'path' | 'query' | 'body'

/** True when every system_uuid the request names (in `parts`) is one of `systems`. */
export function namesOnlyAllowedSystems(
  request: FastifyRequest,
  parts: readonly SystemUuidPart[],
  systems: ReadonlySet<string>,
): boolean {
  for (const part of parts) {
    const holder = (part === 'path' ? request.params : part === 'query' ? request.query : request.body) as
      | Record<string, unknown>
      | null
      | undefined
    if (holder === null || typeof holder !== 'object' || !('system_uuid' in holder)) continue
    const value = holder.system_uuid
    if (value === undefined) continue
    // null would clear system_uuid and take the user out of the key's reach.
    if (typeof value !== 'string' || !systems.has(value.toLowerCase())) return false
  }
  return true
}

/** A preHandler hook (after validation) for an operation whose request names system_uuid in `parts`. */
export function checkSystems(parts: readonly SystemUuidPart[]): preHandlerHookHandler {
  // Named: the order-of-checks test reads hooks by name.
  return function checkKeySystems(request, _reply, done) {
    const systems = request.apiKey?.systems
    if (!systems || namesOnlyAllowedSystems(request, parts, systems)) return done()
    done(appError('SECURITY_SYSTEM_FORBIDDEN'))
  }
}

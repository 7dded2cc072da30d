// The scope check: the operation's scopes come from its security requirement in the spec
// (generated/operations.ts); a valid key that carries none of them is refused with 403.
import type { onRequestHookHandler } from 'fastify'
import { appError } from '../errors.js'

/** An onRequest hook (after the key check) that admits keys carrying one of `scopes`. */
export function requireScope(scopes: readonly string[]): onRequestHookHandler {
  if (scopes.length === 0) throw new Error('a protected operation must name a scope in its security requirement')
  // A callback hook: no promise per request. Named: the order-of-checks test reads hooks by name.
  return function checkScope(request, _reply, done) {
    const granted = request.apiKey?.scopes
    // No key here means the key check already answered; an entry without scopes has them all.
    if (!granted || scopes.some((scope) => granted.has(scope))) return done()
    done(appError('SECURITY_SCOPE_MISSING'))
  }
}

import type { FastifyRequest } from 'fastify'
import { normalizeIP } from '@fastify/rate-limit'
import { ADDRESS_PREFIX } from './sliding-window-store.js'

/**
 * The rate-limit client of a request without a configured key: its address, as
 * @fastify/rate-limit's own default key would be: an IPv6 address by its /64 (one host's usual
 * share, which it can rotate through freely), an IPv4-mapped one as plain IPv4. Normalising an
 * IPv6 address takes ~10 µs, so it is done once per connection (request.ip is the socket's peer:
 * no trustProxy).
 */
const addressClients = new WeakMap<object, string>()
export function addressClient(request: FastifyRequest): string {
  const socket = request.raw.socket
  let client = addressClients.get(socket)
  if (client === undefined) {
    // A socket closed under the request has no address left; its requests share one window.
    client = `${ADDRESS_PREFIX}${request.ip ? normalizeIP(request.ip) : 'unknown'}`
    addressClients.set(socket, client)
  }
  return client
}

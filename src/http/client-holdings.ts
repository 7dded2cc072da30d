// What each client holds at once: requests in progress and request-body bytes in flight. The
// client is the API key's id, or the address for a request without a valid key (the rate
// limiter's client). One Map entry per client that holds something, and plain counters: every
// ending of a request (answered, aborted by its client, cut by a timeout) closes its response,
// and the request pipeline's one 'close' listener per request gives back what it held.
import { ADDRESS_PREFIX } from '../rate-limit/sliding-window-store.js'

interface Holding {
  requests: number
  bodyBytes: number
}

export interface ClientHoldings {
  /** Counts a request of `client`; false (nothing counted) when it has `max` already. Given back by leave. */
  enter(client: string, max: number): boolean
  /** Gives back a request enter counted (when its response closes). */
  leave(client: string): void
  /** Holds `bytes` of body for `client`; false (nothing held) past `max`. Given back by releaseBody. */
  holdBody(client: string, bytes: number, max: number): boolean
  /** Gives back bytes holdBody held (when the request's response closes). */
  releaseBody(client: string, bytes: number): void
  /** Clients with requests in progress now. */
  readonly clients: number
}

export function createClientHoldings(): ClientHoldings {
  const holdings = new Map<string, Holding>()
  const holdingOf = (client: string): Holding => {
    let holding = holdings.get(client)
    if (holding === undefined) {
      holding = { requests: 0, bodyBytes: 0 }
      holdings.set(client, holding)
    }
    return holding
  }
  // An address's entry goes when it holds nothing: addresses without a key are many and
  // short-lived. A key's stays (the configured keys are few), so a busy key allocates nothing.
  const forgetIfEmpty = (client: string, holding: Holding) => {
    if (holding.requests === 0 && holding.bodyBytes === 0 && client.startsWith(ADDRESS_PREFIX)) holdings.delete(client)
  }
  return {
    get clients() {
      let n = 0
      for (const holding of holdings.values()) if (holding.requests > 0) n++
      return n
    },
    enter(client, max) {
      const holding = holdingOf(client)
      if (holding.requests >= max) {
        forgetIfEmpty(client, holding)
        return false
      }
      holding.requests++
      return true
    },
    leave(client) {
      const holding = holdings.get(client)
      if (holding === undefined) return
      holding.requests--
      forgetIfEmpty(client, holding)
    },
    holdBody(client, bytes, max) {
      const holding = holdingOf(client)
      if (holding.bodyBytes + bytes > max) {
        forgetIfEmpty(client, holding)
        return false
      }
      holding.bodyBytes += bytes
      return true
    },
    releaseBody(client, bytes) {
      const holding = holdings.get(client)
      if (holding === undefined) return
      holding.bodyBytes -= bytes
      forgetIfEmpty(client, holding)
    },
  }
}

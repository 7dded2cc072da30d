// The bytes of request bodies the process is receiving or holding at once, across all requests.
// A request reserves what its body may take before any of it is read: its Content-Length, at
// most BODY_LIMIT_BYTES, or the limit itself when the length is not declared (chunked). The
// reservation is given back when the answer is done or the connection closes. Past the budget
// the request is refused before its body is buffered, so clients that send half a body and
// stall cannot pin more memory than the budget between them, however many sockets they open.
// Each client's own share (src/http/client-holdings.ts) is checked first, so one client cannot
// fill the budget for the others.
import type { IncomingMessage } from 'node:http'

export interface BodyBudget {
  /** Whether `bytes` more fit in the process-wide budget. */
  fits(bytes: number): boolean
  /** Reserves `bytes`; false when they do not fit. Given back by release. */
  reserve(bytes: number): boolean
  /** Gives back bytes reserve took (when the request's response closes). */
  release(bytes: number): void
  /** Bytes reserved now (for /metrics). */
  readonly inFlight: number
}

/** What a request's body may take: 0 without a body. */
export function declaredBodyBytes(request: IncomingMessage, bodyLimit: number): number {
  const length = request.headers['content-length']
  if (length !== undefined) {
    const bytes = Number(length)
    // Node has already refused a malformed Content-Length; one past the limit is refused (413) unread.
    return Number.isSafeInteger(bytes) && bytes >= 0 ? Math.min(bytes, bodyLimit) : bodyLimit
  }
  return request.headers['transfer-encoding'] === undefined ? 0 : bodyLimit
}

/** maxBytes 0: no budget (every request fits). */
export function createBodyBudget(maxBytes: number): BodyBudget {
  let inFlight = 0
  const fits = (bytes: number) => maxBytes === 0 || inFlight + bytes <= maxBytes
  return {
    get inFlight() {
      return inFlight
    },
    fits,
    reserve(bytes) {
      if (!fits(bytes)) return false
      inFlight += bytes
      return true
    },
    release(bytes) {
      inFlight -= bytes
    },
  }
}

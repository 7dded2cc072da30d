// The bytes of request bodies the process is receiving or holding at once, across all requests.
// A request reserves what its body may take before any of it is read: its Content-Length, at
// most BODY_LIMIT_BYTES, or the limit itself when the length is not declared (chunked). The
// reservation is given back when the answer is done or the connection closes. Past the budget
// the request is refused before its body is buffered, so clients that send half a body and
// stall cannot pin more memory than the budget between them, however many sockets they open.
import type { IncomingMessage, ServerResponse } from 'node:http'

export interface BodyBudget {
  /** Reserves the request's body bytes until `response` closes; false when they do not fit. */
  reserve(request: IncomingMessage, response: ServerResponse): boolean
  /** Bytes reserved now (for /metrics). */
  readonly inFlight: number
}

/** What a request's body may take: 0 without a body. */
function declaredBodyBytes(request: IncomingMessage, bodyLimit: number): number {
  const length = request.headers['content-length']
  if (length !== undefined) {
    const bytes = Number(length)
    // Node has already refused a malformed Content-Length; one past the limit is refused (413) unread.
    return Number.isSafeInteger(bytes) && bytes >= 0 ? Math.min(bytes, bodyLimit) : bodyLimit
  }
  return request.headers['transfer-encoding'] === undefined ? 0 : bodyLimit
}

/** maxBytes 0: no budget (every request fits). */
export function createBodyBudget(maxBytes: number, bodyLimit: number): BodyBudget {
  let inFlight = 0
  return {
    get inFlight() {
      return inFlight
    },
    reserve(request, response) {
      if (maxBytes === 0) return true
      const bytes = declaredBodyBytes(request, bodyLimit)
      if (bytes === 0) return true
      if (inFlight + bytes > maxBytes) return false
      inFlight += bytes
      response.once('close', () => {
        inFlight -= bytes
      })
      return true
    },
  }
}

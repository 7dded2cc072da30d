// An error envelope written straight to a socket, for answers Node's HTTP parser gives before
// Fastify sees a request (431, malformed HTTP, a request that timed out).
import { randomUUID } from 'node:crypto'
import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import { catalogueEntry, type ErrorKey } from '../errors.js'

const CLOSE_GRACE_MS = 500

export function rawErrorAnswer(key: ErrorKey): string {
  const entry = catalogueEntry(key)
  const body = JSON.stringify({ code: entry.code, key: entry.key, message: entry.message, source: entry.source })
  return (
    `HTTP/1.1 ${entry.status} ${STATUS_CODES[entry.status]}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    `X-Request-Id: ${randomUUID()}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  )
}

/**
 * Answers with the envelope whenever the socket can still take an answer (no response of its
 * own has started on it), then closes the connection. True when the answer was written.
 */
export function answerAndClose(socket: Socket, key: ErrorKey): boolean {
  const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage
  const answered = socket.writable && !inFlight?.headersSent
  if (answered) socket.end(rawErrorAnswer(key))
  // A peer that reads nothing would keep the write, and the socket, pending: it gets a moment
  // to read the answer, then the socket goes regardless.
  setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref()
  return answered
}

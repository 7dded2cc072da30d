// The answer of an idempotent write (src/idempotency/), sent: its status and its JSON text as it
// is (serialized by the route's schema when it was made; a replay's stored bytes), and on a
// replay `Idempotent-Replayed: true` with the Idempotency-Key echoed.
import type { FastifyReply } from 'fastify'
import type { Answer } from '../idempotency/index.js'

/** Sets the reply's status and headers; returns the JSON text for the handler to return. */
export function sendAnswer(reply: FastifyReply, answer: Answer): string {
  // Already JSON text with its content type: Fastify sends it as it is.
  reply.code(answer.status).type('application/json; charset=utf-8')
  if (answer.replayed)
    reply.header('idempotent-replayed', 'true').header('idempotency-key', reply.request.headers['idempotency-key'])
  return answer.json
}

// Over a real socket: a request whose body stops part-way (what a slow or hostile client holds
// on the server), a new user posted with fetch, and a poll for a value the server reaches on
// its own time. Shared by the body-budget and client-fairness tests.
import { connect, type Socket } from 'node:net'
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'

export interface Stalled {
  socket: Socket
  /** The status of the server's answer once the socket closes (0 without one), and its body. */
  answered: Promise<{ status: number; body: string }>
}

/** Writes `headAndPart` (a request head and part of its body) to the port, then nothing more. */
export function stallRequest(port: number, headAndPart: string): Stalled {
  const socket = connect(port, '127.0.0.1')
  let text = ''
  socket.on('data', (c) => (text += c))
  socket.on('error', () => {})
  socket.write(headAndPart)
  const answered = new Promise<{ status: number; body: string }>((resolve) =>
    socket.on('close', () =>
      resolve({ status: Number(text.split(' ')[1] ?? 0) || 0, body: text.slice(text.indexOf('\r\n\r\n') + 4) }),
    ),
  )
  return { socket, answered }
}

/** Waits until `read` gives `expected` (the server acts on its own time); returns the last value. */
export async function settled<T>(read: () => Promise<T>, expected: T): Promise<T> {
  let seen = await read()
  for (let i = 0; i < 200 && seen !== expected; i++) {
    await sleep(20)
    seen = await read()
  }
  return seen
}

/** POST /api/v1/user with a fresh learner and Idempotency-Key. */
export const postNewUser = (baseUrl: string, secret: string, headers: Record<string, string> = {}) =>
  fetch(`${baseUrl}/api/v1/user`, {
    method: 'POST',
    headers: { 'x-api-key': secret, 'content-type': 'application/json', 'idempotency-key': randomUUID(), ...headers },
    body: JSON.stringify({
      system_user_id: `u-${randomUUID().slice(0, 8)}`,
      system_uuid: randomUUID(),
      full_name: 'Stalled Test',
      timezone: 'UTC',
    }),
  })

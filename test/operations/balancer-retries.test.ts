// deploy/haproxy.cfg repeats a request whose connection closed before any answer only when that
// is safe: a read, or a write with an Idempotency-Key (a repeat is a replay). A write without a
// key (a telemetry batch sent without one) reaches a replica once: it may have been stored.
// Replicas here are stand-ins that answer /ready and close every other request unanswered.
import t from 'tap'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { startPrivateHaproxy } from '../helpers/private-haproxy.js'

const received: string[] = []
async function silentReplica(): Promise<string> {
  const server = http.createServer((req, res) => {
    if (req.url === '/ready') return res.end('{"status":"ready"}')
    received.push(`${req.method} ${req.headers['idempotency-key'] ? 'keyed' : 'keyless'}`)
    req.resume()
    req.on('end', () => req.socket.destroy()) // the answer is lost
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return `127.0.0.1:${(server.address() as AddressInfo).port}`
}

const balancer = await startPrivateHaproxy(t, [await silentReplica(), await silentReplica()])

/** How many times the balancer sent the request to a replica before it gave its client up. */
async function attempts(method: string, headers: Record<string, string>): Promise<number> {
  received.length = 0
  try {
    const res = await fetch(`${balancer.base}/api/v1/telemetry/docs-search/batch`, {
      method,
      headers: { 'content-type': 'application/json', connection: 'close', ...headers },
      body: method === 'GET' ? undefined : '{"events":[]}',
    })
    await res.arrayBuffer()
  } catch {
    // The balancer may close the client's connection instead of answering: what counts is above.
  }
  return received.length
}

t.test('a write without an Idempotency-Key reaches a replica once', async (t) => {
  t.equal(await attempts('POST', {}), 1)
})

t.test('a write with an Idempotency-Key and a read are tried again', async (t) => {
  t.ok((await attempts('POST', { 'idempotency-key': 'k-1' })) > 1, 'the keyed write is repeated')
  t.ok((await attempts('GET', {})) > 1, 'the read is repeated')
})

// One HTTP request on an agent, with the key and (for a body) JSON and a fresh Idempotency-Key:
// with `maxSockets: 1` every call of one agent goes over the same keep-alive connection, which
// `reusedSocket` shows.
import { randomBytes } from 'node:crypto'
import http from 'node:http'

export interface KeepAliveAnswer {
  status: number
  body: string
  reusedSocket: boolean
}

export function keepAliveCall(
  agent: http.Agent,
  base: string,
  method: string,
  path: string,
  key: string,
  body?: unknown,
): Promise<KeepAliveAnswer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const headers: Record<string, string> = { 'x-api-key': key }
    if (payload)
      Object.assign(headers, { 'content-type': 'application/json', 'idempotency-key': randomBytes(8).toString('hex') })
    const req = http.request(`${base}${path}`, { method, agent, headers }, (res) => {
      let text = ''
      res.on('data', (chunk) => (text += chunk))
      res.on('end', () => resolve({ status: res.statusCode!, body: text, reusedSocket: req.reusedSocket }))
    })
    req.on('error', reject)
    req.end(payload)
  })
}

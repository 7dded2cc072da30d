// The free-form scan reads a body as it arrives: fed in any chunks it reaches the verdict it
// reaches on the whole text, and over HTTP a value past its cap is refused (422, the connection
// closed) before the rest of the body is sent.
import t from 'tap'
import net from 'node:net'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { freeFormScan } from '../../src/validation/free-form-prescan.js'
import { createTestDatabase } from '../helpers/database.js'
import { NO_LOAD_SHEDDING } from '../helpers/app.js'

const BATCH = '/api/v1/telemetry/docs-search/batch'
const keys = (n: number, prefix = 'k') => `{${Array.from({ length: n }, (_, i) => `"${prefix}${i}":1`).join(',')}}`
const batch = (...events: string[]) => `{"events":[${events.join(',')}]}`
const event = (payload: string) =>
  `{"event":"search_query","query_text":"a \\"quoted\\" \\\\ é ✓","payload":${payload}}`

/** A small deterministic generator: the same splits every run. */
function splits(seed: number) {
  let state = seed
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31
    return state / 2 ** 31
  }
}

t.test('fed in chunks, the scan answers what it answers on the whole text', async (t) => {
  const texts = [
    batch(event(keys(10)), event(keys(3000))),
    batch(event(keys(1500)), event(keys(1500)), event('{"nested":{"a":"\\"}{[,:"}}')),
    batch(event(`{"s":"${'\\\\'.repeat(500)}","t":${keys(2000, 'x"y')}}`)),
    batch(event(keys(40)), '{"event":"x","payload":"not json'),
  ]
  const random = splits(20261128)
  for (const [n, text] of texts.entries()) {
    const whole = freeFormScan('POST', BATCH)!.feed(text)
    for (let round = 0; round < 25; round++) {
      const scan = freeFormScan('POST', BATCH)!
      let verdict = null
      for (let at = 0; at < text.length && !verdict; ) {
        const size = 1 + Math.floor(random() * 300)
        verdict = scan.feed(text.slice(at, at + size))
        at += size
      }
      t.same(verdict, whole, `text ${n}, round ${round}`)
    }
  }
  t.equal(freeFormScan('GET', '/api/v1/user/:system_uuid/:system_user_id'), null, 'no scan without a capped value')
})

t.test('a value past its cap is refused before the rest of the body is sent', async (t) => {
  const db = await createTestDatabase(t)
  const app = await buildApp({
    config: loadConfig({ API_KEYS: 'scan-key', LOG_LEVEL: 'silent', ...NO_LOAD_SHEDDING }),
    sql: db.sql,
    logger: false,
  })
  t.teardown(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as net.AddressInfo
  // 64 KiB of a 1 MiB body; the rest is never written.
  const head = batch(event(keys(90_000))).slice(0, 65_536)
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(
        `POST ${BATCH} HTTP/1.1\r\nHost: x\r\nX-API-Key: scan-key\r\nContent-Type: application/json\r\n` +
          `Content-Length: 1048576\r\n\r\n${head}`,
      )
    })
    let text = ''
    socket.on('data', (chunk) => (text += chunk))
    socket.on('close', () => resolve(text))
    socket.on('error', reject)
  })
  t.match(answer, /^HTTP\/1\.1 422 /, 'answered 422 with the body unfinished')
  t.match(answer, /connection: close/i, 'and the connection closed')
  t.match(answer, /"code":"TELEMETRY_019"/)
  t.match(answer, /"loc":\["body","events",0,"payload"\]/)

  const latin1 = await app.inject({
    method: 'POST',
    url: BATCH,
    headers: { 'x-api-key': 'scan-key', 'content-type': 'application/json; charset=latin1' },
    payload: batch(event(keys(90_000))),
  })
  t.equal(latin1.statusCode, 415, 'another charset is still 415 first (check 12 before 13)')
})

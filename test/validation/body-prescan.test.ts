// The free-form scan reads a body as it arrives: fed in any chunks it reaches the verdict it
// reaches on the whole text, and over HTTP a value past its cap is refused (422, the connection
// closed) before the rest of the body is sent.
import t from 'tap'
import net from 'node:net'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { bodyPrescan } from '../../src/validation/body-prescan.js'
import { createTestDatabase } from '../helpers/database.js'
import { NO_LOAD_SHEDDING } from '../helpers/app.js'

const BATCH = '/api/v1/telemetry/docs-search/batch'
const keys = (n: number, prefix = 'k') => `{${Array.from({ length: n }, (_, i) => `"${prefix}${i}":1`).join(',')}}`
const batch = (...events: string[]) => `{"events":[${events.join(',')}]}`
const event = (payload: string) =>
  `{"event":"search_query","query_text":"a \\"quoted\\" \\\\ é ✓","payload":${payload}}`

/** A batch announced as 1 MiB of which only `head` is sent; what the server answers before it closes. */
function sendUnfinished(port: number, head: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
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
}

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
    batch(...Array.from({ length: 501 }, () => '{"event":"x","emitted_at_ms":1}')),
    batch('{"event":"x","emitted_at_ms":1234567890123456}'),
    batch('{"event":"x","emitted_at_ms":123456789012345}', '{"event":"1e5","query_id":"12345678901234567"}'),
    batch('{"event":"x","emitted_at_ms":12e2}'),
    batch('{"event":"x","query_id":"a\\u0000"}'),
  ]
  const random = splits(20261128)
  for (const [n, text] of texts.entries()) {
    const wholeScan = bodyPrescan('POST', BATCH)!
    const whole = [wholeScan.feed(text), wholeScan.complete, wholeScan.mayHoldBadScalars]
    for (let round = 0; round < 25; round++) {
      const scan = bodyPrescan('POST', BATCH)!
      let verdict = null
      for (let at = 0; at < text.length && !verdict; ) {
        const size = 1 + Math.floor(random() * 300)
        verdict = scan.feed(text.slice(at, at + size))
        at += size
      }
      t.same([verdict, scan.complete, scan.mayHoldBadScalars], whole, `text ${n}, round ${round}`)
    }
  }
  t.equal(bodyPrescan('GET', '/api/v1/user/:system_uuid/:system_user_id'), null, 'no scan without a capped value')
})

t.test('fed a character at a time, each character is read once and the verdict is the same', async (t) => {
  // Long strings cut at every character, escapes cut from what they escape, keys cut in two.
  const texts = [
    batch(event(`{"s":"${'x'.repeat(70_000)}"}`)),
    batch(event(`{"s":"${'\\\\'.repeat(2000)}\\"${'y'.repeat(20_000)}"}`)),
    `{"ev\\u0065nts":[${event(keys(3000))}]}`,
    batch(event('{"a":1}'), '{"event":"x","query_id":"\\u0000"}'),
  ]
  for (const [n, text] of texts.entries()) {
    const whole = bodyPrescan('POST', BATCH)!
    const expected = [whole.feed(text), whole.complete, whole.mayHoldBadScalars]
    const scan = bodyPrescan('POST', BATCH)!
    let verdict = null
    for (let at = 0; at < text.length && !verdict; at++) verdict = scan.feed(text[at]!)
    t.same([verdict, scan.complete, scan.mayHoldBadScalars], expected, `text ${n}`)
  }
})

t.test('the prescan counts a capped array, and notes what the parse-time checks need', async (t) => {
  const scanned = (text: string) => {
    const scan = bodyPrescan('POST', BATCH)!
    return { verdict: scan.feed(text), complete: scan.complete, mayHoldBadScalars: scan.mayHoldBadScalars }
  }
  const events = (n: number) => batch(...Array.from({ length: n }, () => '{"event":"x","emitted_at_ms":1}'))
  t.same(
    scanned(events(500)),
    { verdict: null, complete: true, mayHoldBadScalars: false },
    '500 events: within the cap',
  )
  t.match(scanned(events(501)).verdict, { keyword: 'maxItems', instancePath: '/events', params: { limit: 500 } })
  // Digits and `e` inside strings are text, not numbers: only numbers and escapes count.
  t.equal(scanned(batch('{"event":"1e5","query_id":"1234567890123456789"}')).mayHoldBadScalars, false)
  t.equal(scanned(batch('{"event":"x","emitted_at_ms":123456789012345}')).mayHoldBadScalars, false, '15 digits')
  t.equal(scanned(batch('{"event":"x","emitted_at_ms":1234567890123456}')).mayHoldBadScalars, true, '16 digits')
  t.equal(scanned(batch('{"event":"x","emitted_at_ms":1E400}')).mayHoldBadScalars, true, 'an exponent')
  t.equal(scanned(batch('{"event":"x","query_id":"\\ud800"}')).mayHoldBadScalars, true, 'a \\u escape')
  t.equal(
    scanned(batch('{"event":"x","query_id":"\\\\u"}')).mayHoldBadScalars,
    true,
    'an escaped backslash before u: a walk, not a miss',
  )
  const deep = scanned(`{"events":[{"event":"x","payload":${'['.repeat(70)}${']'.repeat(70)}}]}`)
  t.equal(deep.complete, false, 'too deep: the scan stops, and the parse-time checks read the text')
  t.equal(scanned('{"events":[{"event":"x"}').complete, false, 'unfinished: not complete')
  // The single event's top_results: an array cap and a size cap on one value.
  const single = bodyPrescan('POST', '/api/v1/telemetry/docs-search')!
  t.match(single.feed(JSON.stringify({ event: 'x', top_results: new Array(51).fill({}) })), {
    keyword: 'maxItems',
    instancePath: '/top_results',
  })
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
  const answer = await sendUnfinished(port, head)
  t.match(answer, /^HTTP\/1\.1 422 /, 'answered 422 with the body unfinished')
  t.match(answer, /connection: close/i, 'and the connection closed')
  t.match(answer, /"code":"TELEMETRY_019"/)
  t.match(answer, /"loc":\["body","events",0,"payload"\]/)

  // 600 events in the first 64 KiB: refused at the 501st, the rest of the body never sent.
  const many = batch(...Array.from({ length: 600 }, () => '{"event":"search_query","emitted_at_ms":1}'))
  t.ok(many.length < 65_536)
  const refusedArray = await sendUnfinished(port, many.slice(0, -2))
  t.match(refusedArray, /^HTTP\/1\.1 422 /, 'an array past its cap: 422 with the body unfinished')
  t.match(refusedArray, /"loc":\["body","events"\]/)

  const latin1 = await app.inject({
    method: 'POST',
    url: BATCH,
    headers: { 'x-api-key': 'scan-key', 'content-type': 'application/json; charset=latin1' },
    payload: batch(event(keys(90_000))),
  })
  t.equal(latin1.statusCode, 415, 'another charset is still 415 first (check 12 before 13)')
})

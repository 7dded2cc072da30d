// The request fingerprint: SHA-256 over canonical JSON of the validated body.
import { createHash } from 'node:crypto'
import t from 'tap'
import { requestHash } from '../../src/idempotency/request-hash.js'

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex')

t.test('the hash is SHA-256 of the body with keys sorted at every level and no whitespace', async (t) => {
  const body = { b: 1, a: [2, { d: null, c: 'x' }], e: { g: true, f: 'ü' } }
  t.equal(requestHash(body), sha256('{"a":[2,{"c":"x","d":null}],"b":1,"e":{"f":"ü","g":true}}'))
})

t.test('key order does not change the hash; array order and explicit nulls do', async (t) => {
  t.equal(requestHash({ x: 1, y: 2 }), requestHash({ y: 2, x: 1 }))
  t.not(requestHash({ list: [1, 2] }), requestHash({ list: [2, 1] }))
  t.not(requestHash({ username: null }), requestHash({}))
})

t.test('a missing body hashes as JSON null', async (t) => {
  t.equal(requestHash(undefined), sha256('null'))
})

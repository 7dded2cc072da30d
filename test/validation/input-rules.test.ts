// The pure pieces of the input rules: date-time bounds, string and number rules, the JSON text
// checks, the echo bounds of 422 items and the container guard.
import t from 'tap'
import { isBoundedDateTime } from '../../src/validation/date-time.js'
import { unacceptableNumber, unacceptableString } from '../../src/validation/input-rules.js'
import { isUtf8ContentType, nestedDeeperThan, unacceptableJsonText } from '../../src/validation/json-body-rules.js'
import { echoable, toValidationItems, validationBody } from '../../src/validation/validation-errors.js'
import { containerGuard } from '../../src/validation/container-guard.js'
import { sizeLimitsOf } from '../../src/validation/json-size-limits.js'
import { bodyPrescan } from '../../src/validation/body-prescan.js'

t.test('date-times within years 1..9999 after the offset, real calendar days, no leap second', async (t) => {
  for (const ok of [
    '0001-01-01T00:00:00Z',
    '9999-12-31T23:59:59.999Z',
    '9999-12-31T23:59:59+01:00',
    '2024-02-29T12:00:00-05:30',
    '2026-11-23T09:00:00.123456Z',
    '0001-01-01T00:30:00-01:00',
  ]) {
    t.ok(isBoundedDateTime(ok), ok)
  }
  for (const bad of [
    '2016-12-31T23:59:60Z',
    '0000-01-01T00:00:00Z',
    '0001-01-01T00:30:00+01:00',
    '9999-12-31T23:59:59-01:00',
    '10000-01-01T00:00:00Z',
    '2026-02-29T00:00:00Z',
    '2026-04-31T00:00:00Z',
    '2026-01-01T24:00:00Z',
    '2026-01-01T00:00:00+24:00',
    '2026-01-01',
    '2026-01-01T00:00:00',
  ]) {
    t.notOk(isBoundedDateTime(bad), bad)
  }
})

t.test('strings: NUL and lone surrogates refused, pairs accepted', async (t) => {
  t.equal(unacceptableString('ok \ud83d\ude00'), null)
  t.match(unacceptableString('a\u0000'), /NUL/)
  t.match(unacceptableString('\ud800'), /surrogate/)
  t.match(unacceptableString('x\udc00y'), /surrogate/)
  t.match(unacceptableString('\ude00\ud83d'), /surrogate/, 'a pair in the wrong order is two lone halves')
})

t.test('numbers: finite, and integers within the safe range', async (t) => {
  for (const ok of [0, -0, 1.5, 2 ** 53 - 1, -(2 ** 53 - 1), 1e-300]) t.equal(unacceptableNumber(ok), null, String(ok))
  for (const bad of [Infinity, -Infinity, Number.NaN, 2 ** 53, 2 ** 53 + 2, 1e300])
    t.not(unacceptableNumber(bad), null, String(bad))
})

t.test(
  'JSON text: depth is counted outside strings; the scalar walk runs when the text can hold a bad scalar',
  async (t) => {
    t.ok(nestedDeeperThan('['.repeat(65) + ']'.repeat(65), 64))
    t.notOk(nestedDeeperThan('['.repeat(64) + ']'.repeat(64), 64))
    t.notOk(nestedDeeperThan(JSON.stringify({ a: '['.repeat(100), b: 'q"\\' }), 64))
    const check = (text: string) => unacceptableJsonText(text, JSON.parse(text))
    t.match(check('{"a":"\\u0000"}'), /NUL/)
    t.match(check('{"a":["x","\\uD800"]}'), /surrogate/)
    t.match(check('{"a":1e400}'), /finite/)
    t.match(check('[9007199254740993]'), /2\^53/)
    t.equal(check('{"a":"\\\\u0000","b":1e2}'), null, 'an escaped backslash then u0000 is text, 1e2 is 100')
  },
)

t.test('charset: absent or utf-8 only', async (t) => {
  for (const ok of [
    undefined,
    'application/json',
    'application/json; charset=utf-8',
    'application/json;charset="UTF-8"',
  ])
    t.ok(isUtf8ContentType(ok), String(ok))
  for (const bad of [
    'application/json; charset=latin1',
    'application/json; charset=utf-16',
    'application/json; charset=',
  ])
    t.notOk(isUtf8ContentType(bad), bad)
})

t.test('echoed inputs are bounded', async (t) => {
  t.equal(echoable('x'.repeat(1000)), 'x'.repeat(256))
  t.equal(echoable(`${'x'.repeat(255)}\ud83d\ude00`), 'x'.repeat(255), 'never half a surrogate pair')
  t.same(echoable([1, 2, 3]), [1, 2, 3])
  t.equal(echoable(Array.from({ length: 200 }, () => 1)), null)
  t.equal(echoable({ a: 'x'.repeat(300) }), null)
  t.equal(echoable(undefined), null)
  t.equal(echoable(7), 7)
})

t.test('a 422 keeps at most 50 items and 64 KiB', async (t) => {
  const errors = Array.from({ length: 1000 }, (_, i) => ({
    instancePath: `/${'k'.repeat(5000)}${i}`,
    schemaPath: '#',
    keyword: 'maxLength',
    params: { limit: 1 },
    message: 'too long',
    data: 'y'.repeat(5000),
  }))
  const items = toValidationItems('body', errors, 'user_create')
  t.equal(items.length, 50)
  const body = validationBody('POST', `/${'p'.repeat(20_000)}`, items)
  t.ok(Buffer.byteLength(JSON.stringify(body)) <= 64 * 1024)
  t.ok(body.errors.length >= 1)
})

t.test('the container guard reports an oversize array alone, at any depth', async (t) => {
  const batch = containerGuard('DocsSearchTelemetryBatchRequest')
  t.match(batch({ events: new Array(501).fill({}) }), [{ keyword: 'maxItems', instancePath: '/events' }])
  t.equal(batch({ events: new Array(500).fill({}) }), null, 'within the limit: the full validator decides')
  const nested = batch({ events: [{}, { top_results: new Array(51).fill({}) }] })
  t.match(nested, [{ keyword: 'maxItems', instancePath: '/events/1/top_results' }])
  const unknown = containerGuard('UserCreateRequest')(
    Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, i])),
  )
  t.equal(unknown?.length, 50)
  t.same(
    sizeLimitsOf('DocsSearchTelemetryBatchRequest').map((l) => l.path.join('.')),
    ['events.*.top_results', 'events.*.payload'],
  )
})

t.test('a top-level array over its maxItems is found on the text, before parsing', async (t) => {
  const scan = (url: string, body: unknown) =>
    bodyPrescan('POST', url)!.feed(typeof body === 'string' ? body : JSON.stringify(body))
  const batch = (body: unknown) => scan('/api/v1/telemetry/docs-search/batch', body)
  t.match(batch({ events: new Array(501).fill({}) }), {
    keyword: 'maxItems',
    instancePath: '/events',
    params: { limit: 500 },
  })
  t.equal(
    batch({ events: new Array(500).fill({ a: [1, 2], s: 'x,y' }) }),
    null,
    'commas inside items and strings do not count',
  )
  t.equal(batch({ 'events"': new Array(600).fill(1), events: [] }), null, 'only the declared key counts')
  t.equal(batch('{"events":[1,2,'), null, 'not JSON: left to the parser')
  t.equal(bodyPrescan('POST', '/api/v1/user'), null, 'no caps on this body')
  t.match(scan('/api/v1/conspectuses', { bullets: new Array(51).fill('x') }), { instancePath: '/bullets' })
})

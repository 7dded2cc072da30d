// The response checker used by every test catches what it must catch.
import t from 'tap'
import { contractProblems } from '../helpers/contract.js'
import { buildTestApp } from '../helpers/app.js'

const ok = {
  'x-request-id': 'r',
  'x-ratelimit-limit': '1',
  'x-ratelimit-remaining': '0',
  'x-ratelimit-reset': '1',
  'ratelimit-policy': '"default";q=1;w=60',
  ratelimit: '"default";r=0;t=1',
}
const envelope = JSON.stringify({ code: 'USER_404', key: 'USER_NOT_FOUND', message: 'm', source: 'business' })
const url = '/api/v1/user/3f2c2f57-9d55-4a0b-8a3c-1c1f5b2f4e10/u'

t.test('a conforming response has no problems', async (t) => {
  t.same(contractProblems('GET', url, 404, ok, envelope), [])
})

t.test('an undeclared status is reported', async (t) => {
  t.match(contractProblems('GET', url, 409, ok, envelope), [/status not declared/])
})

t.test('a missing required header is reported', async (t) => {
  const { 'x-ratelimit-remaining': _gone, ...headers } = ok
  t.match(contractProblems('GET', url, 404, headers, envelope), [/missing header X-RateLimit-Remaining/])
  t.match(contractProblems('GET', '/live', 200, {}, JSON.stringify({ status: 'alive', app_env: 'dev' })), [
    /missing header X-Request-Id/,
  ])
})

t.test('a body off its schema is reported, 4xx envelopes included', async (t) => {
  t.match(contractProblems('GET', url, 404, ok, JSON.stringify({ code: 'USER_404', detail: 'x' })), [
    /does not match schema/,
  ])
  t.match(contractProblems('GET', url, 200, ok, JSON.stringify({ client_uuid: 'not-a-uuid' })), [
    /does not match schema/,
  ])
  t.match(contractProblems('GET', url, 200, ok, 'not json'), [/not JSON/])
})

t.test('routes are matched by template, static segments first', async (t) => {
  const due = '/api/v1/conspectuses/due?system_user_id=a&system_uuid=b'
  t.same(contractProblems('GET', due, 200, ok, '[]'), [], 'the due list, not a conspectus by id')
  t.same(contractProblems('POST', url, 404, {}, ''), [], 'undeclared methods are left to the 404 tests')
})

t.test('/docs renders offline: the page and its assets are served locally', async (t) => {
  const api = await buildTestApp(t)
  const page = await api.request({ method: 'GET', url: '/docs/', key: null })
  t.equal(page.statusCode, 200)
  const refs = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!)
  t.ok(refs.length > 0, `${refs.length} assets referenced`)
  for (const ref of refs) {
    t.notMatch(ref, /^(https?:)?\/\//, `${ref} is local`)
    const asset = await api.request({ method: 'GET', url: new URL(ref, 'http://x/docs/').pathname, key: null })
    t.equal(asset.statusCode, 200, ref)
  }
  const init = await api.request({ method: 'GET', url: '/docs/static/swagger-initializer.js', key: null })
  t.match(init.body, /\/openapi\.json/, 'the UI loads the served contract')
  t.notMatch(init.body, /url:\s*["'`]https?:/, 'and no external URL')
})

// Each operation's error codes are findable in the served document (and so in /docs), come from
// x-error-catalogue, and match what the service answers. Every response the tests receive through
// test/helpers/app.ts is also checked: a code the operation's document does not list fails it.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { readSpec } from '../../src/spec.js'
import { buildServedDocument } from '../../src/docs/served-document.js'
import { errorCodesByOperation, listOperations } from '../../src/docs/operation-errors.js'
import { unlistedCodes } from '../helpers/contract.js'
import { buildTestApp, newKey } from '../helpers/app.js'

const spec = readSpec() as any

t.test('the served document lists, on every error response, the codes from the catalogue', async (t) => {
  const api = await buildTestApp(t)
  const served = (await api.get('/openapi.json')).json()
  t.same(served, buildServedDocument(spec), '/openapi.json is the spec plus the generated lists')
  t.same((await api.get('/docs/json')).json(), served, '/docs/json serves the same document')

  const codes = errorCodesByOperation(spec)
  for (const op of listOperations(served)) {
    for (const [status, response] of Object.entries<any>(op.operation.responses)) {
      if (Number(status) < 400 || op.operation.security?.length === 0) continue
      const entries = codes.get(op.operationId)!.get(status) ?? []
      t.ok(entries.length > 0, `${op.operationId} ${status} has at least one code`)
      t.same(
        response['x-error-codes'],
        entries.map((e) => ({ code: e.code, key: e.key })),
        `${op.operationId} ${status} x-error-codes`,
      )
      for (const e of entries)
        t.match(response.description, `\`${e.code}\` | \`${e.key}\``, `${op.operationId} ${status} table has ${e.key}`)
      const examples = Object.values<any>(response.content['application/json'].examples).map((x) => x.value)
      t.equal(examples.length, entries.length, `${op.operationId} ${status}: one example per code`)
      for (const value of examples) {
        t.same(
          unlistedCodes(op.operationId, op.operationId, Number(status), value),
          [],
          `${op.operationId} ${status} example is its own code`,
        )
        if (value.endpoint)
          t.equal(value.endpoint, `${op.method} ${op.path}`, `${op.operationId} 422 example names its own endpoint`)
      }
    }
  }
})

t.test('examples are right for their operation', async (t) => {
  const served = buildServedDocument(spec)
  const getUser = served.paths['/api/v1/user/{system_uuid}/{system_user_id}'].get.responses
  t.same(
    getUser['422']['x-error-codes'],
    [{ code: 'COMMON_422', key: 'REQUEST_PARAMETER_INVALID' }],
    'a GET shows no body codes',
  )
  t.same(
    getUser['400']['x-error-codes'],
    [{ code: 'COMMON_400', key: 'MALFORMED_REQUEST' }],
    'a GET shows no Idempotency-Key or business 400',
  )
  t.same(getUser['401']['x-error-codes'], [{ code: 'COMMON_401', key: 'SECURITY_AUTH_REQUIRED' }])
  const createUser = served.paths['/api/v1/user'].post.responses
  t.notMatch(JSON.stringify(createUser['400']), 'USER_404', 'the 400 of createUser never shows USER_404')
  t.notMatch(JSON.stringify(createUser['422']), 'COMMON_422', 'a body-only POST has no parameter to fail')
  t.match(createUser['422']['x-error-codes'], [{ code: 'USER_001' }])
  t.notMatch(
    JSON.stringify(served.paths['/api/v1/telemetry/docs-search'].post.responses),
    'IDEMPOTENCY_KEY_',
    'no Idempotency-Key codes without the header',
  )
})

t.test('the check fails on a code the operation does not list', async (t) => {
  t.same(unlistedCodes('w', 'getUserBySystemUserId', 404, { code: 'USER_404', key: 'USER_NOT_FOUND' }), [])
  t.equal(unlistedCodes('w', 'getUserBySystemUserId', 404, { code: 'CONS_404', key: 'CONSPECTUS_NOT_FOUND' }).length, 1)
  t.equal(
    unlistedCodes('w', 'createUser', 422, {
      errors: [{ code: 'CONS_001', key: 'CONSPECTUS_CREATE_SYSTEM_USER_ID_REQUIRED' }],
    }).length,
    1,
  )
})

t.test('a sweep of bad requests on every operation answers only listed codes', async (t) => {
  // buildTestApp's request() throws on any unlisted code, so each call below is an assertion.
  const api = await buildTestApp(t)
  const user = { system_user_id: `sweep-${Date.now()}`, system_uuid: randomUUID() }
  const created = await api.post('/api/v1/user', { ...user, full_name: 'Sweep' })
  t.equal(created.statusCode, 201)
  const ghost = { system_user_id: 'ghost', system_uuid: randomUUID() }
  const seen = new Set<string>()
  for (const op of listOperations(spec)) {
    if (op.operation.security?.length === 0) continue
    const path = op.path
      .replace('{system_uuid}', ghost.system_uuid)
      .replace('{system_user_id}', ghost.system_user_id)
      .replace('{conspectus_uuid}', randomUUID())
    const query = op.method === 'GET' ? `?system_user_id=${ghost.system_user_id}&system_uuid=${ghost.system_uuid}` : ''
    // The schema's own example, owned by a user that does not exist.
    const bodyRef = op.operation.requestBody?.content['application/json'].schema.$ref as string | undefined
    const example = bodyRef
      ? structuredClone(spec.components.schemas[bodyRef.split('/').pop()!].examples[0])
      : undefined
    const body = example && 'system_uuid' in example ? { ...example, ...ghost } : example
    const answers = [
      await api.request({ method: op.method as never, url: path + query, key: null }),
      await api.request({
        method: op.method as never,
        url: `${path}?system_user_id=&system_uuid=nope&limit=0&window_minutes=0`,
      }),
      await api.request({
        method: op.method as never,
        url: path + query,
        payload: body === undefined ? undefined : { unknown: 1 },
        headers: { 'idempotency-key': newKey() },
      }),
      await api.request({
        method: op.method as never,
        url: path + query,
        payload: body,
        headers: { 'idempotency-key': newKey() },
      }),
    ]
    if (op.parameterRefs.includes('IdempotencyKey')) {
      answers.push(await api.request({ method: op.method as never, url: path, payload: body }))
      answers.push(
        await api.request({
          method: op.method as never,
          url: path,
          payload: 'x',
          headers: { 'content-type': 'text/plain', 'idempotency-key': newKey() },
        }),
      )
    }
    for (const a of answers) if (a.statusCode >= 400) seen.add(`${a.statusCode}`)
  }
  t.ok(
    ['400', '401', '404', '415', '422'].every((s) => seen.has(s)),
    `the sweep reached the usual error statuses (${[...seen].join(', ')})`,
  )
})

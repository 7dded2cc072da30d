// The scope and system hooks on their own, for what the wiring never lets a request show: an
// operation declared without a scope, a key that grants one of several scopes, a request that
// reached the hooks without a key (the key check has answered it), and request parts that hold
// no object or an absent system_uuid.
import t from 'tap'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { requireScope } from '../../src/auth/scope.js'
import { checkSystems, namesOnlyAllowedSystems } from '../../src/auth/systems.js'

const A = '0b7c6a3e-2f41-4a8e-9d55-0d6c1a3b9e11'
const B = '5a1d0f2c-7e93-4b6a-8c04-3f2e9b7d6a55'

/** What a callback hook passes to done(): undefined to go on, or the error it answers with. */
function run(
  hook: (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => void,
  request: object,
) {
  let outcome: Error | undefined | 'not called' = 'not called'
  hook(request as FastifyRequest, {} as FastifyReply, (err) => {
    outcome = err
  })
  return outcome as Error | undefined | 'not called'
}

t.test('requireScope', async (t) => {
  t.throws(() => requireScope([]), { message: 'a protected operation must name a scope in its security requirement' })
  const hook = requireScope(['users:read', 'users:export'])
  t.equal(run(hook, { apiKey: { scopes: new Set(['users:export']) } }), undefined, 'one of the scopes is enough')
  t.match(run(hook, { apiKey: { scopes: new Set(['study:read']) } }), { key: 'SECURITY_SCOPE_MISSING' })
  t.equal(run(hook, { apiKey: { scopes: null } }), undefined, 'an API_KEYS key has every scope')
  t.equal(run(hook, {}), undefined, 'no key: the key check has answered already')
})

t.test('checkSystems', async (t) => {
  const hook = checkSystems(['path', 'query', 'body'])
  const bound = { scopes: null, systems: new Set([A]) }
  t.equal(run(hook, {}), undefined, 'no key: the key check has answered already')
  t.equal(run(hook, { apiKey: { systems: null }, params: { system_uuid: B } }), undefined, 'an unbound key')
  t.equal(run(hook, { apiKey: bound, params: {}, query: {}, body: { system_uuid: A.toUpperCase() } }), undefined)
  t.match(run(hook, { apiKey: bound, params: {}, query: { system_uuid: B }, body: undefined }), {
    key: 'SECURITY_SYSTEM_FORBIDDEN',
  })
})

t.test('namesOnlyAllowedSystems: parts without a system_uuid are passed over, null is not', async (t) => {
  const systems = new Set([A])
  const request = (parts: object) => parts as FastifyRequest
  for (const body of [null, undefined, 'text', 5, {}, { system_uuid: undefined }])
    t.ok(
      namesOnlyAllowedSystems(request({ params: { system_uuid: A }, body }), ['path', 'body'], systems),
      `body ${JSON.stringify(body) ?? 'undefined'}`,
    )
  t.notOk(namesOnlyAllowedSystems(request({ body: { system_uuid: null } }), ['body'], systems), 'null clears it')
  t.notOk(namesOnlyAllowedSystems(request({ params: { system_uuid: B } }), ['path', 'body'], systems))
})

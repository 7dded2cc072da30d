// The contract-test provider-state route (CONTRACT_STATES=1, dev/qa only) answers 400 for an
// unknown state, inherited property names included, and for malformed params: never 500.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { PROVIDER_STATES_PATH } from '../../src/plugins/app/contract-states.js'
import { createTestDatabase } from '../helpers/database.js'

const db = await createTestDatabase(t)
const app = await buildApp({
  config: loadConfig({
    API_KEYS: 'states-key',
    CONTRACT_STATES: '1',
    APP_ENV: 'qa',
    DATABASE_URL: db.url,
    LOG_LEVEL: 'silent',
  }),
  sql: db.sql,
  logger: false,
})
t.teardown(() => app.close())
const setUp = (payload: unknown) =>
  app.inject({ method: 'POST', url: PROVIDER_STATES_PATH, payload: payload as object })

t.test('state names that are properties of every object are unknown states', async (t) => {
  for (const state of ['constructor', '__proto__', 'valueOf', 'hasOwnProperty', 'toString', 42, null]) {
    const res = await setUp({ state, params: { system_uuid: randomUUID(), system_user_id: 'u' } })
    t.equal(res.statusCode, 400, String(state))
    t.match(res.json(), { error: /unknown provider state/, known: ['a user exists', 'a user has a conspectus'] })
  }
})

t.test('malformed params are 400 with what is wrong', async (t) => {
  const cases: [unknown, RegExp][] = [
    [{ system_uuid: 42, system_user_id: 'u' }, /system_uuid must be a UUID/],
    [{ system_uuid: 'not-a-uuid', system_user_id: 'u' }, /system_uuid must be a UUID/],
    [{ system_uuid: randomUUID(), system_user_id: ['u'] }, /system_user_id must be a non-empty string/],
    [{ system_uuid: randomUUID(), system_user_id: 'x'.repeat(100) }, /answered 422/],
    ['params', /params must be an object/],
  ]
  for (const [params, error] of cases) {
    const res = await setUp({ state: 'a user exists', params })
    t.equal(res.statusCode, 400, JSON.stringify(params).slice(0, 60))
    t.match(res.json(), { error })
  }
  t.equal((await setUp([1])).statusCode, 400, 'a body that is not an object')
  t.equal((await setUp({ state: 'a user exists', action: 'explode' })).statusCode, 400)
})

t.test('a known state with good params is set up', async (t) => {
  const owner = { system_uuid: randomUUID(), system_user_id: 'ada' }
  const res = await setUp({ state: 'a user exists', params: owner })
  t.equal(res.statusCode, 200)
  t.same(res.json(), owner)
  t.equal((await setUp({ action: 'teardown' })).statusCode, 200)
})

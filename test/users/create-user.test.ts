import t from 'tap'
import { randomUUID } from 'node:crypto'
import { buildTestApp, newKey } from '../helpers/app.js'

const api = await buildTestApp(t)
const newUser = (overrides: Record<string, unknown> = {}) => ({
  system_user_id: `u-${randomUUID().slice(0, 8)}`,
  system_uuid: randomUUID(),
  full_name: 'Ada Lovelace',
  ...overrides,
})

t.test('POST /api/v1/user creates a user with server defaults', async (t) => {
  const body = newUser()
  const res = await api.post('/api/v1/user', body)
  t.equal(res.statusCode, 201)
  const user = res.json()
  t.match(user, { ...body, username: null, timezone: 'UTC', is_row_invalid: 0, invalidation_reason_uuid: null })
  t.match(user.client_uuid, /^[0-9a-f-]{36}$/)
  t.equal(user.created_at, user.updated_at)
  const read = await api.get(`/api/v1/user/${body.system_uuid}/${body.system_user_id}`)
  t.same(read.json(), user)
})

t.test('a second create with the same natural key is 400 USER_101', async (t) => {
  const body = newUser()
  t.equal((await api.post('/api/v1/user', body)).statusCode, 201)
  const res = await api.post('/api/v1/user', { ...body, full_name: 'Someone else' })
  t.equal(res.statusCode, 400)
  t.same(res.json(), {
    code: 'USER_101',
    key: 'USER_CREATE_ALREADY_EXISTS',
    message: 'A user with this system_user_id and system_uuid already exists.',
    source: 'business',
  })
})

t.test('the same key and body replays the stored answer, keys in any order', async (t) => {
  const body = newUser({ timezone: 'Europe/Berlin', username: 'ada' })
  const key = newKey()
  const first = await api.post('/api/v1/user', body, key)
  const reordered = Object.fromEntries(Object.entries(body).reverse())
  const replay = await api.post('/api/v1/user', reordered, key)
  t.equal(replay.statusCode, 201)
  t.equal(replay.headers['idempotent-replayed'], 'true')
  t.equal(first.headers['idempotent-replayed'], undefined)
  t.equal(replay.payload, first.payload, 'the stored answer is sent byte for byte')
  t.equal(replay.headers['content-type'], first.headers['content-type'])
  const count = await api.db.sql`select count(*)::int as n from users where system_user_id = ${body.system_user_id}`
  t.equal(count[0]!.n, 1)
})

t.test('the same key with another body is 409 COMMON_409', async (t) => {
  const key = newKey()
  t.equal((await api.post('/api/v1/user', newUser(), key)).statusCode, 201)
  const res = await api.post('/api/v1/user', newUser(), key)
  t.equal(res.statusCode, 409)
  t.match(res.json(), { code: 'COMMON_409', key: 'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD' })
})

t.test('a failed write is not recorded: the key can be used again', async (t) => {
  const body = newUser()
  await api.post('/api/v1/user', body)
  const key = newKey()
  t.equal((await api.post('/api/v1/user', body, key)).statusCode, 400)
  const other = newUser()
  t.equal((await api.post('/api/v1/user', other, key)).statusCode, 201)
})

t.test('10 concurrent identical creates make one user and ten equal answers', async (t) => {
  const body = newUser()
  const key = newKey()
  const answers = await Promise.all(Array.from({ length: 10 }, () => api.post('/api/v1/user', body, key)))
  t.same(
    answers.map((a) => a.statusCode),
    Array(10).fill(201),
  )
  t.equal(new Set(answers.map((a) => a.body)).size, 1)
  t.equal(answers.filter((a) => a.headers['idempotent-replayed'] === 'true').length, 9)
  const [row] = await api.db.sql`select count(*)::int as n from users where system_user_id = ${body.system_user_id}`
  t.equal(row!.n, 1)
})

t.test('the Idempotency-Key header is required and checked', async (t) => {
  const missing = await api.post('/api/v1/user', newUser(), null)
  t.equal(missing.statusCode, 400)
  t.match(missing.json(), { code: 'COMMON_400', key: 'IDEMPOTENCY_KEY_REQUIRED' })
  for (const bad of ['x'.repeat(129), 'ключ']) {
    const res = await api.post('/api/v1/user', newUser(), bad)
    t.equal(res.statusCode, 400, `key of ${bad.length} chars`)
    t.match(res.json(), { code: 'COMMON_400', key: 'IDEMPOTENCY_KEY_INVALID' })
  }
  t.equal((await api.post('/api/v1/user', newUser(), 'k'.repeat(128))).statusCode, 201)
})

t.test('body validation comes before the Idempotency-Key check', async (t) => {
  const res = await api.post('/api/v1/user', { ...newUser(), full_name: '' }, null)
  t.equal(res.statusCode, 422)
  t.equal(res.json().errors[0].code, 'USER_004')
})

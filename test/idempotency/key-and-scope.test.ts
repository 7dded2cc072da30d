// The two other parts of an idempotent write's record key: the Idempotency-Key's format, and the
// scope derived from the operation and its path (stored, so its text must stay what every release
// since 0009 writes and reads).
import t from 'tap'
import { idempotencyKeyError, isValidIdempotencyKey } from '../../src/idempotency/key.js'
import { idempotencyScope } from '../../src/idempotency/scope.js'

t.test('a key is 1 to 128 printable ASCII characters, anchored at both ends', async (t) => {
  for (const good of ['k', ' ~', 'k'.repeat(128)]) t.ok(isValidIdempotencyKey(good), JSON.stringify(good))
  for (const bad of ['', 'k'.repeat(129), 'éabc', 'abcé', 'a\tb', 128, null, undefined, ['k']])
    t.notOk(isValidIdempotencyKey(bad), JSON.stringify(bad) ?? String(bad))
  t.equal(idempotencyKeyError('ok'), undefined)
  t.match(idempotencyKeyError(undefined), { code: 'COMMON_400', key: 'IDEMPOTENCY_KEY_REQUIRED' })
  t.match(idempotencyKeyError('é'), { code: 'COMMON_400', key: 'IDEMPOTENCY_KEY_INVALID' })
  t.match(idempotencyKeyError(''), { key: 'IDEMPOTENCY_KEY_INVALID' })
})

t.test('the scope is the path with its values, UUIDs lower-cased, PATCH marked', async (t) => {
  const upper = '0B8F9A8E-7F6E-4C1D-9D3E-2A1B0C9D8E7F'
  t.equal(idempotencyScope('createUser', {}), '/api/v1/user')
  t.equal(idempotencyScope('createConspectus', {}), '/api/v1/conspectuses')
  t.equal(
    idempotencyScope('patchConspectus', { conspectus_uuid: upper }),
    `PATCH /api/v1/conspectuses/${upper.toLowerCase()}`,
  )
  t.equal(
    idempotencyScope('reviewConspectus', { conspectus_uuid: upper }),
    `/api/v1/conspectuses/${upper.toLowerCase()}/actions/review`,
  )
  const params = { system_uuid: upper, system_user_id: 'Learner-ABC' }
  t.equal(idempotencyScope('updateUserBySystemUserId', params), `/api/v1/user/${upper.toLowerCase()}/Learner-ABC`)
  t.equal(
    idempotencyScope('patchUserBySystemUserId', params),
    `PATCH /api/v1/user/${upper.toLowerCase()}/Learner-ABC`,
    'a non-UUID parameter keeps its case; PUT and PATCH on one URL stay apart',
  )
})

t.test('an operation that is not an idempotent write has no scope', async (t) => {
  t.throws(() => idempotencyScope('getUserBySystemUserId', {}), /getUserBySystemUserId is not idempotent/)
  t.throws(() => idempotencyScope('noSuchOperation', {}), /noSuchOperation is not idempotent/)
})

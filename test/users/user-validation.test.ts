// Every field condition of the user bodies answers 422 with its catalogued code.
import t, { type Test } from 'tap'
import { randomUUID } from 'node:crypto'
import { buildTestApp } from '../helpers/app.js'

const api = await buildTestApp(t)
const valid = () => ({
  system_user_id: `v-${randomUUID().slice(0, 8)}`,
  system_uuid: randomUUID(),
  full_name: 'Valid Name',
})
const omit = (o: Record<string, unknown>, k: string) =>
  Object.fromEntries(Object.entries(o).filter(([key]) => key !== k))

async function expectCodes(t: Test, res: Awaited<ReturnType<typeof api.post>>, expected: [string, string | null][]) {
  t.equal(res.statusCode, 422, res.body)
  const body = res.json()
  t.equal(body.error_type, 'validation_error')
  t.same(
    body.errors.map((e: { code: string; field: string | null }) => [e.code, e.field]),
    expected,
  )
  for (const e of body.errors) t.equal(e.source, 'validation')
}

const createCases: [string, () => unknown, [string, string | null][]][] = [
  ['missing system_user_id', () => omit(valid(), 'system_user_id'), [['USER_001', 'system_user_id']]],
  ['empty system_user_id', () => ({ ...valid(), system_user_id: '' }), [['USER_002', 'system_user_id']]],
  ['numeric system_user_id', () => ({ ...valid(), system_user_id: 42 }), [['USER_002', 'system_user_id']]],
  ['system_user_id over 36', () => ({ ...valid(), system_user_id: 'x'.repeat(37) }), [['USER_003', 'system_user_id']]],
  ['empty full_name', () => ({ ...valid(), full_name: '' }), [['USER_004', 'full_name']]],
  ['full_name over 255', () => ({ ...valid(), full_name: 'x'.repeat(256) }), [['USER_005', 'full_name']]],
  ['missing full_name', () => omit(valid(), 'full_name'), [['USER_006', 'full_name']]],
  ['non-string full_name', () => ({ ...valid(), full_name: ['a'] }), [['USER_006', 'full_name']]],
  ['missing system_uuid', () => omit(valid(), 'system_uuid'), [['USER_007', 'system_uuid']]],
  ['null system_uuid', () => ({ ...valid(), system_uuid: null }), [['USER_007', 'system_uuid']]],
  [
    'malformed system_uuid',
    () => ({ ...valid(), system_uuid: 'urn:uuid:3f2c2f57-9d55-4a0b-8a3c-1c1f5b2f4e10' }),
    [['USER_007', 'system_uuid']],
  ],
  ['username over 255', () => ({ ...valid(), username: 'u'.repeat(256) }), [['USER_008', 'username']]],
  ['numeric username', () => ({ ...valid(), username: 7 }), [['USER_008', 'username']]],
  ['unknown time zone', () => ({ ...valid(), timezone: 'Mars/Olympus_Mons' }), [['USER_009', 'timezone']]],
  ['empty time zone', () => ({ ...valid(), timezone: '' }), [['USER_009', 'timezone']]],
  ['time zone over 64', () => ({ ...valid(), timezone: 'A'.repeat(65) }), [['USER_009', 'timezone']]],
  ['is_row_invalid 2', () => ({ ...valid(), is_row_invalid: 2 }), [['USER_010', 'is_row_invalid']]],
  ['is_row_invalid "1"', () => ({ ...valid(), is_row_invalid: '1' }), [['USER_010', 'is_row_invalid']]],
  [
    'bad invalidation_reason_uuid',
    () => ({ ...valid(), invalidation_reason_uuid: 'nope' }),
    [['USER_011', 'invalidation_reason_uuid']],
  ],
  ['unknown property', () => ({ ...valid(), admin: true }), [['USER_012', 'admin']]],
  ['array body', () => [valid()], [['USER_013', null]]],
  [
    'two failures at once',
    () => ({ ...valid(), full_name: '', timezone: 'Nowhere/Land' }),
    [
      ['USER_004', 'full_name'],
      ['USER_009', 'timezone'],
    ],
  ],
]

for (const [name, body, expected] of createCases) {
  t.test(`create: ${name}`, async (t) => {
    await expectCodes(t, await api.post('/api/v1/user', body()), expected)
  })
}

t.test('create: malformed JSON is 422 USER_013 with loc ["body"]', async (t) => {
  const res = await api.request({
    method: 'POST',
    url: '/api/v1/user',
    payload: '{"full_name":',
    headers: { 'content-type': 'application/json', 'idempotency-key': 'm1' },
  })
  await expectCodes(t, res, [['USER_013', null]])
  t.same(res.json().errors[0].details, { loc: ['body'], type: 'json_invalid', input: null, ctx: {} })
})

t.test('create: 422 items carry loc, type, input and ctx', async (t) => {
  const res = await api.post('/api/v1/user', { ...valid(), full_name: 'x'.repeat(256) })
  const [item] = res.json().errors
  t.same(item.details, { loc: ['body', 'full_name'], type: 'maxLength', input: 'x'.repeat(256), ctx: { limit: 255 } })
  t.equal(item.key, 'USER_CREATE_FULL_NAME_TOO_LONG')
  t.equal(res.json().endpoint, 'POST /api/v1/user')
})

const user = valid()
t.before(async () => {
  const res = await api.post('/api/v1/user', user)
  if (res.statusCode !== 201) throw new Error(res.body)
})
const url = () => `/api/v1/user/${user.system_uuid}/${user.system_user_id}`

const updateCases: [string, 'put' | 'patch', unknown, [string, string | null][]][] = [
  ['PUT empty full_name', 'put', { full_name: '', timezone: 'UTC' }, [['USER_014', 'full_name']]],
  ['PATCH full_name over 255', 'patch', { full_name: 'x'.repeat(256) }, [['USER_015', 'full_name']]],
  ['PUT missing full_name', 'put', { timezone: 'UTC' }, [['USER_016', 'full_name']]],
  ['PATCH unknown time zone', 'patch', { timezone: 'Moon/Base' }, [['USER_017', 'timezone']]],
  ['PUT missing timezone', 'put', { full_name: 'A' }, [['USER_018', 'timezone']]],
  [
    'PUT username over 255',
    'put',
    { full_name: 'A', timezone: 'UTC', username: 'u'.repeat(256) },
    [['USER_019', 'username']],
  ],
  ['PATCH is_row_invalid 5', 'patch', { is_row_invalid: 5 }, [['USER_020', 'is_row_invalid']]],
  [
    'PUT is_row_invalid null',
    'put',
    { full_name: 'A', timezone: 'UTC', is_row_invalid: null },
    [['USER_020', 'is_row_invalid']],
  ],
  [
    'PATCH bad invalidation_reason_uuid',
    'patch',
    { invalidation_reason_uuid: 12 },
    [['USER_021', 'invalidation_reason_uuid']],
  ],
  ['PATCH bad system_uuid', 'patch', { system_uuid: 'abc' }, [['USER_022', 'system_uuid']]],
  ['PATCH unknown property', 'patch', { nickname: 'x' }, [['USER_023', 'nickname']]],
  ['PUT unknown property', 'put', { full_name: 'A', timezone: 'UTC', client_uuid: 'x' }, [['USER_023', 'client_uuid']]],
]

for (const [name, method, body, expected] of updateCases) {
  t.test(`update: ${name}`, async (t) => {
    await expectCodes(t, await api[method](url(), body), expected)
  })
}

t.test('update: a JSON string body is 422 USER_024', async (t) => {
  const res = await api.request({
    method: 'PATCH',
    url: url(),
    payload: '"just a string"',
    headers: { 'content-type': 'application/json', 'idempotency-key': 's1' },
  })
  await expectCodes(t, res, [['USER_024', null]])
})

t.test('path parameters are checked: 422 COMMON_422 with loc ["path", name]', async (t) => {
  const res = await api.get(`/api/v1/user/not-a-uuid/${'x'.repeat(37)}`)
  t.equal(res.statusCode, 422)
  const items = res.json().errors
  t.same(
    items.map((e: { code: string; details: { loc: unknown } }) => [e.code, e.details.loc]),
    [
      ['COMMON_422', ['path', 'system_uuid']],
      ['COMMON_422', ['path', 'system_user_id']],
    ],
  )
  t.equal(items[0].key, 'REQUEST_PARAMETER_INVALID')
})

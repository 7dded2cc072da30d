// Conspectus and error-log bodies: each field condition answers 422 with its catalogued code.
import t, { type Test } from 'tap'
import { randomUUID } from 'node:crypto'
import { buildTestApp } from '../helpers/app.js'
import { conspectusBody, createConspectus, createOwner } from '../helpers/fixtures.js'

const api = await buildTestApp(t)
const owner = await createOwner(api)
const note = await createConspectus(api, owner)

async function expectCodes(
  t: Test,
  res: { statusCode: number; body: string; json(): any },
  expected: [string, string | null][],
) {
  t.equal(res.statusCode, 422, res.body)
  t.same(
    res.json().errors.map((e: { code: string; field: string | null }) => [e.code, e.field]),
    expected,
  )
}
const omit = (o: Record<string, unknown>, k: string) =>
  Object.fromEntries(Object.entries(o).filter(([key]) => key !== k))

const createCases: [string, Record<string, unknown>, [string, string | null][]][] = [
  ['missing system_user_id', omit(conspectusBody(owner), 'system_user_id'), [['CONS_001', 'system_user_id']]],
  ['empty system_user_id', conspectusBody(owner, { system_user_id: '' }), [['CONS_002', 'system_user_id']]],
  ['missing system_uuid', omit(conspectusBody(owner), 'system_uuid'), [['CONS_003', 'system_uuid']]],
  ['bad system_uuid', conspectusBody(owner, { system_uuid: 'x' }), [['CONS_004', 'system_uuid']]],
  ['title over 200', conspectusBody(owner, { title: 't'.repeat(201) }), [['CONS_005', 'title']]],
  ['missing cue_sheet', omit(conspectusBody(owner), 'cue_sheet'), [['CONS_006', 'cue_sheet']]],
  ['cue_sheet as an array', conspectusBody(owner, { cue_sheet: [{ keywords: 'a' }] }), [['CONS_007', 'cue_sheet']]],
  [
    'cue_sheet over 64 KiB',
    conspectusBody(owner, { cue_sheet: { topic: 'x'.repeat(65_536) } }),
    [['CONS_007', 'cue_sheet']],
  ],
  ['missing dense_paragraph', omit(conspectusBody(owner), 'dense_paragraph'), [['CONS_008', 'dense_paragraph']]],
  ['empty dense_paragraph', conspectusBody(owner, { dense_paragraph: '' }), [['CONS_009', 'dense_paragraph']]],
  [
    'dense_paragraph over 20000',
    conspectusBody(owner, { dense_paragraph: 'd'.repeat(20_001) }),
    [['CONS_009', 'dense_paragraph']],
  ],
  ['missing bullets', omit(conspectusBody(owner), 'bullets'), [['CONS_010', 'bullets']]],
  ['51 bullets', conspectusBody(owner, { bullets: Array(51).fill('b') }), [['CONS_011', 'bullets']]],
  ['an empty bullet', conspectusBody(owner, { bullets: ['ok', ''] }), [['CONS_011', 'bullets']]],
  ['a bullet over 1000', conspectusBody(owner, { bullets: ['b'.repeat(1001)] }), [['CONS_011', 'bullets']]],
  ['slot typed by the user', conspectusBody(owner, { slot: 'D' }), [['CONS_012', 'slot']]],
]
for (const [name, body, expected] of createCases) {
  t.test(`create: ${name}`, async (t) => expectCodes(t, await api.post('/api/v1/conspectuses', body), expected))
}

t.test('create: a bad bullet is located by its index', async (t) => {
  const res = await api.post('/api/v1/conspectuses', conspectusBody(owner, { bullets: ['ok', 'ok', ''] }))
  t.same(res.json().errors[0].details.loc, ['body', 'bullets', 2])
})

t.test('create: a cue_sheet of exactly 64 KiB is accepted', async (t) => {
  const cue_sheet = { topic: 'x'.repeat(65_536 - '{"topic":""}'.length) }
  t.equal(Buffer.byteLength(JSON.stringify(cue_sheet)), 65_536)
  t.equal((await api.post('/api/v1/conspectuses', conspectusBody(owner, { cue_sheet }))).statusCode, 201)
})

t.test('create: size checks come before the Idempotency-Key check', async (t) => {
  const res = await api.post(
    '/api/v1/conspectuses',
    conspectusBody(owner, { cue_sheet: { topic: 'x'.repeat(70_000) } }),
    null,
  )
  await expectCodes(t, res, [['CONS_007', 'cue_sheet']])
})

const patchUrl = `/api/v1/conspectuses/${note.conspectus_uuid}`
const patchCases: [string, Record<string, unknown>, [string, string | null][]][] = [
  ['missing owner id', { system_uuid: owner.system_uuid, title: 'x' }, [['CONS_014', 'system_user_id']]],
  [
    'bad owner uuid',
    { system_user_id: owner.system_user_id, system_uuid: 'nope', title: 'x' },
    [['CONS_015', 'system_uuid']],
  ],
  ['title not a string', { ...owner, title: 5 }, [['CONS_016', 'title']]],
  ['cue_sheet null', { ...owner, cue_sheet: null }, [['CONS_017', 'cue_sheet']]],
  ['empty dense_paragraph', { ...owner, dense_paragraph: '' }, [['CONS_018', 'dense_paragraph']]],
  ['bullets not an array', { ...owner, bullets: 'one' }, [['CONS_019', 'bullets']]],
  ['schedule fields', { ...owner, next_review_at: '2030-01-01T00:00:00Z' }, [['CONS_020', 'next_review_at']]],
]
for (const [name, body, expected] of patchCases) {
  t.test(`patch: ${name}`, async (t) => expectCodes(t, await api.patch(patchUrl, body), expected))
}

const reviewUrl = `/api/v1/conspectuses/${note.conspectus_uuid}/actions/review`
t.test('review: owner key and outcome are required, nothing else is allowed', async (t) => {
  await expectCodes(t, await api.post(reviewUrl, { system_uuid: owner.system_uuid, outcome: 'forgot' }), [
    ['CONS_022', 'system_user_id'],
  ])
  await expectCodes(t, await api.post(reviewUrl, { system_user_id: owner.system_user_id, outcome: 'forgot' }), [
    ['CONS_023', 'system_uuid'],
  ])
  await expectCodes(t, await api.post(reviewUrl, { ...owner }), [['CONS_024', 'outcome']])
  await expectCodes(t, await api.post(reviewUrl, { ...owner, outcome: 'forgot', slot: 'D' }), [['CONS_025', 'slot']])
  await expectCodes(t, await api.post(reviewUrl, [owner]), [['CONS_026', null]])
})

t.test('path conspectus_uuid must be a UUID: 422 COMMON_422', async (t) => {
  const res = await api.post('/api/v1/conspectuses/not-a-uuid/actions/review', { ...owner, outcome: 'forgot' })
  t.equal(res.statusCode, 422)
  t.same(res.json().errors[0].details.loc, ['path', 'conspectus_uuid'])
})

const errorCases: [string, Record<string, unknown>, [string, string | null][]][] = [
  ['missing owner id', { system_uuid: owner.system_uuid, message: 'm' }, [['ERRLOG_001', 'system_user_id']]],
  ['bad owner uuid', { system_user_id: 'a', system_uuid: 1, message: 'm' }, [['ERRLOG_002', 'system_uuid']]],
  ['missing message', { ...owner }, [['ERRLOG_003', 'message']]],
  ['empty message', { ...owner, message: '' }, [['ERRLOG_004', 'message']]],
  ['message over 2000', { ...owner, message: 'm'.repeat(2001) }, [['ERRLOG_004', 'message']]],
  ['bad conspectus_uuid', { ...owner, message: 'm', conspectus_uuid: 'x' }, [['ERRLOG_005', 'conspectus_uuid']]],
  ['context as an array', { ...owner, message: 'm', context: [1] }, [['ERRLOG_006', 'context']]],
  [
    'context over 16 KiB',
    { ...owner, message: 'm', context: { blob: 'c'.repeat(16_384) } },
    [['ERRLOG_006', 'context']],
  ],
  ['unknown field', { ...owner, message: 'm', severity: 'high' }, [['ERRLOG_007', 'severity']]],
]
for (const [name, body, expected] of errorCases) {
  t.test(`error log: ${name}`, async (t) => expectCodes(t, await api.post('/api/v1/errors', body), expected))
}

t.test('error log: a cursor that does not decode is 422 COMMON_422', async (t) => {
  for (const cursor of [
    'garbage',
    Buffer.from('["x","y"]').toString('base64url'),
    Buffer.from('{}').toString('base64url'),
  ]) {
    const res = await api.get(
      `/api/v1/errors?system_user_id=${owner.system_user_id}&system_uuid=${owner.system_uuid}&cursor=${cursor}`,
    )
    t.equal(res.statusCode, 422, cursor)
    t.match(res.json().errors[0], { code: 'COMMON_422', field: 'cursor', details: { loc: ['query', 'cursor'] } })
  }
  const other = randomUUID()
  t.equal((await api.get(`/api/v1/errors?system_user_id=x&system_uuid=${other}&limit=101`)).statusCode, 422)
})

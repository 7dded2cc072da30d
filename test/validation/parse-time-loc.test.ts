// Values refused at parse time (a non-finite or unsafe number, NUL, a lone surrogate) are located
// like schema errors: 422 with the code of the field that holds them and `loc` down to the item,
// in a batch, a single event, users and conspectuses (src/plugins/app/json-body.ts).
import t, { type Test } from 'tap'
import { randomUUID } from 'node:crypto'
import { buildTestApp } from '../helpers/app.js'
import { conspectusBody, createConspectus, createOwner } from '../helpers/fixtures.js'

const api = await buildTestApp(t)
const owner = await createOwner(api)
const raw = (method: 'POST' | 'PUT' | 'PATCH', url: string, payload: string, idempotent = true) =>
  api.request({
    method,
    url,
    payload,
    headers: { 'content-type': 'application/json', ...(idempotent ? { 'idempotency-key': randomUUID() } : {}) },
  })
const event = (extra = '') => `{"event":"search_query","emitted_at_ms":1${extra}}`

async function refused(
  t: Test,
  res: Awaited<ReturnType<typeof raw>>,
  code: string,
  loc: (string | number)[],
  field: string,
) {
  t.equal(res.statusCode, 422, res.body)
  const [item, ...rest] = res.json().errors
  t.same(rest, [], 'one item')
  t.match(item, { code, field, source: 'validation', details: { loc, input: null } })
  // The type and message say what is wrong with the value, not that a field is missing.
  t.match(item.details.type, /^(string|number)_invalid$/, 'a type naming the kind of value')
  t.match(
    item.message,
    /^body \S+ (contains a NUL|contains a lone UTF-16 surrogate|is not a finite|is an integer outside)/,
  )
  return item
}

t.test('telemetry batch: the fourth event is named', async (t) => {
  for (const bad of ['1e19', '9223372036854775807', '1e400', '-9007199254740993']) {
    const events = [event(), event(), event(), `{"event":"search_query","emitted_at_ms":${bad}}`].join(',')
    const res = await raw('POST', '/api/v1/telemetry/docs-search/batch', `{"events":[${events}]}`, false)
    await refused(t, res, 'TELEMETRY_004', ['body', 'events', 3, 'emitted_at_ms'], 'emitted_at_ms')
  }
  const nul = await raw(
    'POST',
    '/api/v1/telemetry/docs-search/batch',
    `{"events":[${event()},${event(',"query_text":"a\\u0000b"')}]}`,
    false,
  )
  await refused(t, nul, 'TELEMETRY_008', ['body', 'events', 1, 'query_text'], 'query_text')
  // Inside a free-form field: the field's own code, the loc down to the item.
  const deep = await raw(
    'POST',
    '/api/v1/telemetry/docs-search/batch',
    `{"events":[${event()},${event()},${event(',"payload":{"a":[1,{"n":1e400}]}')}]}`,
    false,
  )
  await refused(t, deep, 'TELEMETRY_019', ['body', 'events', 2, 'payload', 'a', 1, 'n'], 'payload')
})

t.test('telemetry single event', async (t) => {
  await refused(
    t,
    await raw('POST', '/api/v1/telemetry/docs-search', '{"event":"e","emitted_at_ms":9223372036854775807}', false),
    'TELEMETRY_004',
    ['body', 'emitted_at_ms'],
    'emitted_at_ms',
  )
  await refused(
    t,
    await raw('POST', '/api/v1/telemetry/docs-search', event(',"top_results":[{"u":"\\ud800"}]'), false),
    'TELEMETRY_018',
    ['body', 'top_results', 0, 'u'],
    'top_results',
  )
  await refused(
    t,
    await raw('POST', '/api/v1/telemetry/docs-search', event(',"session_id":"\\udc00"'), false),
    'TELEMETRY_006',
    ['body', 'session_id'],
    'session_id',
  )
})

t.test('users: create, put and patch', async (t) => {
  const create = await raw(
    'POST',
    '/api/v1/user',
    `{"system_user_id":"a\\u0000","system_uuid":"${randomUUID()}","full_name":"x"}`,
  )
  await refused(t, create, 'USER_002', ['body', 'system_user_id'], 'system_user_id')
  const url = `/api/v1/user/${owner.system_uuid}/${encodeURIComponent(owner.system_user_id)}`
  await refused(
    t,
    await raw('PUT', url, '{"full_name":"x","timezone":"UTC","username":"\\ud800"}'),
    'USER_019',
    ['body', 'username'],
    'username',
  )
  await refused(
    t,
    await raw('PATCH', url, '{"is_row_invalid":1e400}'),
    'USER_020',
    ['body', 'is_row_invalid'],
    'is_row_invalid',
  )
})

t.test('conspectuses: create, patch and review', async (t) => {
  // A marker string replaced in the JSON text by a raw escape that JSON.stringify would not write.
  const body = (extra: Record<string, unknown>, rawText: string) =>
    JSON.stringify(conspectusBody(owner, extra)).replace('"MARK"', rawText)
  const cue = body({ cue_sheet: { topic: 't', rows: [{ keywords: 'k', question: 'q', hint: 'MARK' }] } }, '"\\u0000"')
  await refused(
    t,
    await raw('POST', '/api/v1/conspectuses', cue),
    'CONS_007',
    ['body', 'cue_sheet', 'rows', 0, 'hint'],
    'cue_sheet',
  )
  const bullets = body({ bullets: ['ok', 'MARK'] }, '"\\udfff"')
  await refused(t, await raw('POST', '/api/v1/conspectuses', bullets), 'CONS_011', ['body', 'bullets', 1], 'bullets')
  const id = (await createConspectus(api, owner)).conspectus_uuid
  const who = `"system_user_id":${JSON.stringify(owner.system_user_id)},"system_uuid":"${owner.system_uuid}"`
  await refused(
    t,
    await raw('PATCH', `/api/v1/conspectuses/${id}`, `{${who},"title":"t\\u0000"}`),
    'CONS_016',
    ['body', 'title'],
    'title',
  )
  await refused(
    t,
    await raw('POST', `/api/v1/conspectuses/${id}/actions/review`, `{${who},"outcome":"\\ud800"}`),
    'CONS_024',
    ['body', 'outcome'],
    'outcome',
  )
})

t.test(
  'a lone surrogate or NUL in full_name: the field is there and a string; the answer says what is wrong',
  async (t) => {
    const create = await raw(
      'POST',
      '/api/v1/user',
      `{"system_user_id":"u-${randomUUID()}","system_uuid":"${randomUUID()}","full_name":"a\\udc00b"}`,
    )
    const item = await refused(t, create, 'USER_025', ['body', 'full_name'], 'full_name')
    t.match(item, {
      key: 'USER_CREATE_FULL_NAME_MALFORMED',
      message: 'body full_name contains a lone UTF-16 surrogate',
      details: { type: 'string_invalid' },
    })
    const url = `/api/v1/user/${owner.system_uuid}/${encodeURIComponent(owner.system_user_id)}`
    const patch = await refused(
      t,
      await raw('PATCH', url, '{"full_name":"a\\u0000"}'),
      'USER_026',
      ['body', 'full_name'],
      'full_name',
    )
    t.match(patch, { key: 'USER_UPDATE_FULL_NAME_MALFORMED', message: 'body full_name contains a NUL character' })
    const cue = JSON.stringify(
      conspectusBody(owner, { cue_sheet: { topic: 't', rows: [{ keywords: 'k', question: 'q', hint: 'MARK' }] } }),
    ).replace('"MARK"', '"\\udc00"')
    const inCue = await refused(
      t,
      await raw('POST', '/api/v1/conspectuses', cue),
      'CONS_007',
      ['body', 'cue_sheet', 'rows', 0, 'hint'],
      'cue_sheet',
    )
    t.equal(inCue.message, 'body cue_sheet.rows.0.hint contains a lone UTF-16 surrogate', 'the path down to the value')
  },
)

// A learner's data, whole: one note read, all notes listed in pages, one note deleted, the
// learner exported, and the learner erased from every table (stored answers included), on real
// PostgreSQL. Hostile input to each new route answers a declared 4xx.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { API_KEY, buildTestApp, newKey } from '../helpers/app.js'
import { createConspectus, createOwner, type Owner, ownerQuery } from '../helpers/fixtures.js'
import { writeKeyFile } from '../helpers/keys.js'
import { buildAppWithLogLines } from '../helpers/logged-app.js'

const SYSTEM_A = randomUUID()
const SYSTEM_B = randomUUID()
const keyFile = await writeKeyFile(t, [
  { id: 'unscoped', secret: 'ssk_unscoped' },
  { id: 'eraser', secret: 'ssk_eraser', scopes: ['users:erase'] },
  { id: 'reader', secret: 'ssk_reader', scopes: ['users:read', 'study:read'] },
  { id: 'system-a', secret: 'ssk_system_a', systems: [SYSTEM_A] },
  { id: 'eraser-a', secret: 'ssk_eraser_a', scopes: ['users:erase'], systems: [SYSTEM_A] },
])
const api = await buildTestApp(t, { API_KEYS_FILE: keyFile })
const { sql } = api.db

const noteUrl = (id: string, owner: Owner) => `/api/v1/conspectuses/${id}?${ownerQuery(owner)}`
const userUrl = (owner: Owner) => `/api/v1/user/${owner.system_uuid}/${encodeURIComponent(owner.system_user_id)}`
const del = (url: string, key: string = API_KEY, headers: Record<string, string> = {}) =>
  api.request({ method: 'DELETE', url, key, headers })

t.test('one note is read by its id whatever its schedule; another learner gets 404', async (t) => {
  const owner = await createOwner(api)
  const other = await createOwner(api)
  const note = await createConspectus(api, owner)
  await api.post(`/api/v1/conspectuses/${note.conspectus_uuid}/actions/review`, { ...owner, outcome: 'remembered' })
  const read = await api.get(noteUrl(note.conspectus_uuid, owner))
  t.equal(read.statusCode, 200)
  t.match(read.json(), { conspectus_uuid: note.conspectus_uuid, slot: 'B', review_count: 1, ...owner })
  const upper = await api.get(noteUrl(note.conspectus_uuid.toUpperCase(), owner))
  t.equal(upper.json().conspectus_uuid, note.conspectus_uuid, 'the id in any case')
  t.equal((await api.get(noteUrl(note.conspectus_uuid, other))).json().code, 'CONS_404', "another learner's note")
  t.equal((await api.get(noteUrl(randomUUID(), owner))).json().code, 'CONS_404')
  const ghost = { system_user_id: 'ghost', system_uuid: randomUUID() }
  t.equal((await api.get(noteUrl(note.conspectus_uuid, ghost))).json().code, 'USER_404')
})

t.test('the list walks every note exactly once, oldest first, in pages; slot filters', async (t) => {
  const owner = await createOwner(api)
  const other = await createOwner(api)
  await createConspectus(api, other)
  const ids: string[] = []
  for (let i = 0; i < 7; i++) ids.push((await createConspectus(api, owner, { title: `n${i}` })).conspectus_uuid)
  await api.post(`/api/v1/conspectuses/${ids[2]}/actions/review`, { ...owner, outcome: 'remembered' })
  const seen: string[] = []
  let cursor: string | null = null
  let pages = 0
  do {
    const res = await api.get(
      `/api/v1/conspectuses?${ownerQuery(owner)}&limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    )
    t.equal(res.statusCode, 200)
    const page = res.json() as { items: { conspectus_uuid: string }[]; next_cursor: string | null }
    seen.push(...page.items.map((i) => i.conspectus_uuid))
    cursor = page.next_cursor
    pages++
  } while (cursor && pages < 10)
  t.equal(pages, 3)
  t.same(seen, ids, 'creation order, each once, none of the other learner')
  const inB = await api.get(`/api/v1/conspectuses?${ownerQuery(owner)}&slot=B`)
  t.same(
    inB.json().items.map((i: { conspectus_uuid: string }) => i.conspectus_uuid),
    [ids[2]],
  )
  t.equal(inB.json().next_cursor, null)
  const empty = await createOwner(api)
  t.same((await api.get(`/api/v1/conspectuses?${ownerQuery(empty)}`)).json(), { items: [], next_cursor: null })
})

t.test('DELETE removes the note; its error logs keep their message and lose the link; again is 404', async (t) => {
  const owner = await createOwner(api)
  const note = await createConspectus(api, owner)
  const keep = await createConspectus(api, owner)
  const linked = (
    await api.post('/api/v1/errors', { ...owner, message: 'linked', conspectus_uuid: note.conspectus_uuid })
  ).json()
  const elsewhere = (
    await api.post('/api/v1/errors', { ...owner, message: 'elsewhere', conspectus_uuid: keep.conspectus_uuid })
  ).json()
  const gone = await del(noteUrl(note.conspectus_uuid, owner), API_KEY, { 'idempotency-key': newKey() })
  t.equal(gone.statusCode, 200)
  t.same(gone.json(), { conspectus_uuid: note.conspectus_uuid, deleted: true, unlinked_error_logs: 1 })
  t.equal((await api.get(noteUrl(note.conspectus_uuid, owner))).json().code, 'CONS_404')
  const logs = (await api.get(`/api/v1/errors?${ownerQuery(owner)}`)).json().items as Record<string, unknown>[]
  t.match(
    logs.find((l) => l.error_log_uuid === linked.error_log_uuid),
    { message: 'linked', conspectus_uuid: null },
  )
  t.match(
    logs.find((l) => l.error_log_uuid === elsewhere.error_log_uuid),
    { conspectus_uuid: keep.conspectus_uuid },
  )
  const again = await del(noteUrl(note.conspectus_uuid, owner))
  t.equal(again.statusCode, 404)
  t.equal(again.json().code, 'CONS_404', 'a second DELETE: already gone')
  const [stored] = await sql<{ n: number }[]>`select count(*)::int as n from idempotency_records
    where scope like ${`%${note.conspectus_uuid}%`} or response_body like '%"deleted":true%'`
  t.equal(stored!.n, 0, 'a DELETE stores no answer, with or without an Idempotency-Key')
  const other = await createOwner(api)
  t.equal((await del(noteUrl(keep.conspectus_uuid, other))).json().code, 'CONS_404', "another learner's note stays")
  t.equal((await api.get(noteUrl(keep.conspectus_uuid, owner))).statusCode, 200)
})

t.test('the export is one JSON document: the user, every note, every error log', async (t) => {
  const owner = await createOwner(api, { full_name: 'Ada Export', username: 'ada' })
  const notes = [await createConspectus(api, owner), await createConspectus(api, owner, { title: null })]
  const log = (await api.post('/api/v1/errors', { ...owner, message: 'm', context: { a: [1] } })).json()
  await createConspectus(api, await createOwner(api))
  const res = await api.get(`${userUrl(owner)}/export`)
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^application\/json/)
  const doc = res.json()
  t.same(doc.user, (await api.get(userUrl(owner))).json())
  t.same(doc.conspectuses, notes, 'every note as the API answers it, oldest first')
  t.same(doc.error_logs, [log])
  t.match(doc.exported_at, /^\d{4}-\d\d-\d\dT/)
  t.equal((await api.get(`/api/v1/user/${randomUUID()}/nobody/export`)).json().code, 'USER_404')
  // The connection is released right after the last chunk; each poll is one round trip.
  let open = 1
  for (let i = 0; i < 100 && open > 0; i++) {
    const [row] = await sql`select count(*)::int as n from pg_stat_activity
      where datname = current_database() and state like 'idle in transaction%'`
    open = row!.n as number
  }
  t.equal(open, 0, 'the export transaction is closed once the body is sent')
})

t.test('the export needs users:export: an unscoped file key holds it, a key with other scopes does not', async (t) => {
  const owner = await createOwner(api)
  t.equal((await api.request({ method: 'GET', url: `${userUrl(owner)}/export`, key: 'ssk_unscoped' })).statusCode, 200)
  const refused = await api.request({ method: 'GET', url: `${userUrl(owner)}/export`, key: 'ssk_reader' })
  t.equal(refused.statusCode, 403)
  t.equal(refused.json().key, 'SECURITY_SCOPE_MISSING')
})

/** Every column of every table whose text form contains `needle`, as `table.column`. */
async function columnsHolding(needles: string[]): Promise<string[]> {
  const columns = await sql<{ schema: string; table: string; column: string }[]>`
    select c.table_schema as schema, c.table_name as table, c.column_name as column
    from information_schema.columns c
    join information_schema.tables t on t.table_schema = c.table_schema and t.table_name = c.table_name
    where c.table_schema not in ('pg_catalog', 'information_schema') and t.table_type = 'BASE TABLE'`
  t.ok(columns.length > 20, `${columns.length} columns scanned`)
  const found: string[] = []
  for (const { schema, table, column } of columns) {
    const [row] = await sql`
      select count(*)::int as n from ${sql(schema)}.${sql(table)}
      where ${sql(column)}::text like any(${needles.map((s) => `%${s}%`)}::text[])`
    if (row!.n > 0) found.push(`${table}.${column}`)
  }
  return found
}

t.test('erasure removes the learner from every column of every table; the key may be created anew', async (t) => {
  const tag = randomUUID().slice(0, 8)
  const owner = { system_user_id: `erase-${tag}`, system_uuid: randomUUID() }
  const created = await api.post('/api/v1/user', { ...owner, full_name: `Fullname ${tag}`, username: `uname-${tag}` })
  t.equal(created.statusCode, 201)
  await api.put(userUrl(owner), { full_name: `Renamed ${tag}`, timezone: 'Europe/Paris' })
  await api.patch(userUrl(owner), { username: `patched-${tag}` })
  const note = await createConspectus(api, owner, { dense_paragraph: `para-${tag}`, title: `title-${tag}` })
  const deleted = await createConspectus(api, owner, { bullets: [`bullet-${tag}`] })
  const key2 = { 'x-api-key': 'test-key-2' }
  await api.request({
    method: 'PATCH',
    url: `/api/v1/conspectuses/${note.conspectus_uuid}`,
    payload: { ...owner, cue_sheet: { cue: `cue-${tag}` } },
    headers: { ...key2, 'idempotency-key': newKey() },
  })
  await api.patch(`/api/v1/conspectuses/${deleted.conspectus_uuid}`, { ...owner, title: `gone-${tag}` })
  await api.post(`/api/v1/conspectuses/${note.conspectus_uuid}/actions/review`, { ...owner, outcome: 'forgot' })
  const log = (
    await api.post('/api/v1/errors', {
      ...owner,
      message: `msg-${tag}`,
      conspectus_uuid: note.conspectus_uuid,
      context: { detail: `ctx-${tag}` },
    })
  ).json()
  await del(noteUrl(deleted.conspectus_uuid, owner))
  // Someone else whose data must stay whole.
  const bystander = await createOwner(api, { full_name: `Bystander ${tag}` })
  const theirNote = await createConspectus(api, bystander)
  const clientUuid = created.json().client_uuid as string
  const needles = [tag, clientUuid, note.conspectus_uuid, deleted.conspectus_uuid, log.error_log_uuid]
  const before = await columnsHolding(needles)
  t.ok(before.includes('idempotency_records.response_body'), `held before: ${before.join(', ')}`)
  t.ok(before.includes('users.full_name'))
  const storedBefore = (await sql`select count(*)::int as n from idempotency_records`)[0]!.n as number

  const erased = await del(userUrl(owner), 'ssk_eraser')
  t.equal(erased.statusCode, 200)
  t.same(erased.json(), { deleted: true, erased: { users: 1, conspectuses: 1, error_logs: 1, stored_answers: 9 } })
  // `-tag`: the bystander's name holds the tag after a space, the learner's strings after a dash.
  t.same(
    await columnsHolding(needles.map((s) => (s === tag ? `-${tag}` : s))),
    [],
    'no column of any table holds the learner',
  )
  // The bystander's name shares the tag; everything of theirs is still there.
  t.equal((await api.get(noteUrl(theirNote.conspectus_uuid, bystander))).statusCode, 200)
  const storedAfter = (await sql`select count(*)::int as n from idempotency_records`)[0]!.n as number
  t.equal(storedAfter, storedBefore - 9, "the other learners' stored answers stay")

  t.equal((await api.get(userUrl(owner))).json().code, 'USER_404')
  t.equal((await del(userUrl(owner))).json().code, 'USER_404', 'a second erasure: already gone')
  const anew = await api.post('/api/v1/user', { ...owner, full_name: 'Someone new' })
  t.equal(anew.statusCode, 201, 'the natural key may be created anew')
  t.not(anew.json().client_uuid, clientUuid)
  t.same((await api.get(`/api/v1/conspectuses?${ownerQuery(owner)}`)).json().items, [], 'with nothing of the old one')
})

t.test('erasure removes a stored answer that names the learner by one reference only, not by the key', async (t) => {
  // The service's own answers also carry the learner's key; these carry one reference each (as
  // an answer of another shape would), so each clause of the erasure is what finds them.
  const owner = await createOwner(api)
  const clientUuid = (await api.get(userUrl(owner))).json().client_uuid as string
  const note = await createConspectus(api, owner)
  const log = (await api.post('/api/v1/errors', { ...owner, message: 'only by its id' })).json()
  const bystander = await createOwner(api)
  const bystanderUuid = (await api.get(userUrl(bystander))).json().client_uuid as string
  const answers = {
    byClientUuid: { client_uuid: clientUuid, full_name: 'Owner' },
    byNote: { conspectus_uuid: note.conspectus_uuid, title: 'Photosynthesis' },
    byErrorLog: { error_log_uuid: log.error_log_uuid, message: 'only by its id' },
    bystander: { client_uuid: bystanderUuid, full_name: 'Owner' },
  }
  const tag = randomUUID()
  for (const [name, body] of Object.entries(answers))
    await sql`insert into idempotency_records (key_id, scope, idempotency_key, request_hash, status_code, response_body, expires_at)
              values ('test', 'POST /api/v1/fixture', ${`${tag}-${name}`}, 'h', 201, ${JSON.stringify(body)}, now() + interval '1 hour')`
  const left = async () =>
    (
      await sql<{ k: string }[]>`select idempotency_key as k from idempotency_records
                                 where idempotency_key like ${`${tag}-%`}`
    )
      .map((r) => r.k.slice(tag.length + 1))
      .sort()
  t.same(await left(), ['byClientUuid', 'byErrorLog', 'byNote', 'bystander'])
  const erased = await del(userUrl(owner), 'ssk_eraser')
  t.equal(erased.statusCode, 200)
  t.same(await left(), ['bystander'], "each answer naming the learner went; the other learner's stayed")
})

t.test('users:erase: API_KEYS keys and file keys that name it; not an unscoped file key', async (t) => {
  const owner = await createOwner(api, { system_uuid: SYSTEM_B })
  const refused = await del(userUrl(owner), 'ssk_unscoped')
  t.equal(refused.statusCode, 403)
  t.equal(refused.json().key, 'SECURITY_SCOPE_MISSING')
  t.equal((await api.get(userUrl(owner))).statusCode, 200, 'nothing erased by a refused call')
  t.equal((await del(userUrl(owner), 'ssk_eraser')).statusCode, 200)
})

t.test("a key bound to systems gets 403 for another system's learner on every new route", async (t) => {
  const owner = await createOwner(api, { system_uuid: SYSTEM_B })
  const note = await createConspectus(api, owner)
  const key = 'ssk_system_a'
  const calls = [
    api.request({ method: 'GET', url: noteUrl(note.conspectus_uuid, owner), key }),
    api.request({ method: 'GET', url: `/api/v1/conspectuses?${ownerQuery(owner)}`, key }),
    del(noteUrl(note.conspectus_uuid, owner), key),
    api.request({ method: 'GET', url: `${userUrl(owner)}/export`, key }),
    del(userUrl(owner), 'ssk_eraser_a'),
  ]
  for (const res of await Promise.all(calls)) {
    t.equal(res.statusCode, 403)
    t.equal(res.json().key, 'SECURITY_SYSTEM_FORBIDDEN')
  }
  t.equal((await api.get(noteUrl(note.conspectus_uuid, owner))).statusCode, 200, 'nothing was deleted')
})

t.test('hostile input answers a declared 4xx', async (t) => {
  const owner = await createOwner(api)
  const note = await createConspectus(api, owner)
  const q = ownerQuery(owner)
  const cases: [string, string, number][] = [
    ['GET', `/api/v1/conspectuses/not-a-uuid?${q}`, 422],
    ['DELETE', `/api/v1/conspectuses/${note.conspectus_uuid}x?${q}`, 422],
    ['GET', `/api/v1/conspectuses/${note.conspectus_uuid}`, 422],
    ['GET', `/api/v1/conspectuses?${q}&limit=100000`, 422],
    ['GET', `/api/v1/conspectuses?${q}&limit=0`, 422],
    ['GET', `/api/v1/conspectuses?${q}&limit=1e400`, 422],
    ['GET', `/api/v1/conspectuses?${q}&slot=E`, 422],
    ['GET', `/api/v1/conspectuses?${q}&cursor=forged`, 422],
    [
      'GET',
      `/api/v1/conspectuses?${q}&cursor=${Buffer.from('["0000-01-01T00:00:00.000000Z","x"]').toString('base64url')}`,
      422,
    ],
    ['GET', `/api/v1/conspectuses?${q}&cursor=${'A'.repeat(600)}`, 422],
    ['GET', `/api/v1/conspectuses?system_user_id=${'x'.repeat(37)}&system_uuid=${owner.system_uuid}`, 422],
    ['GET', `/api/v1/user/not-a-uuid/x/export`, 422],
    ['GET', `/api/v1/user/${randomUUID()}/${'x'.repeat(37)}/export`, 422],
    ['DELETE', `/api/v1/user/not-a-uuid/x`, 422],
    ['DELETE', `/api/v1/user/${randomUUID()}/%00`, 422],
    ['PUT', `/api/v1/conspectuses/${note.conspectus_uuid}`, 405],
    ['POST', `${userUrl(owner)}/export`, 405],
    ['DELETE', `${userUrl(owner)}/export`, 405],
    ['DELETE', `/api/v1/conspectuses?${q}`, 405],
    // `due` is no UUID: the DELETE of /api/v1/conspectuses/{conspectus_uuid} refuses it.
    ['DELETE', `/api/v1/conspectuses/due?${q}`, 422],
  ]
  for (const [method, url, status] of cases) {
    const res = await api.request({ method: method as 'GET', url })
    t.equal(res.statusCode, status, `${method} ${url.slice(0, 90)}`)
    const body = res.json()
    t.match(
      body,
      status === 422 ? { error_type: 'validation_error', errors: Array } : { code: String },
      'declared body',
    )
  }
  t.equal((await api.get(noteUrl(note.conspectus_uuid, owner))).statusCode, 200, 'the note is untouched')
})

t.test('the erasure is logged with the key id and counts, nothing about the learner', async (t) => {
  const { app, lines } = await buildAppWithLogLines(t, 'plain-key')
  const system = randomUUID()
  const headers = { 'x-api-key': 'plain-key', 'content-type': 'application/json', 'idempotency-key': 'k1' }
  const made = await app.inject({
    method: 'POST',
    url: '/api/v1/user',
    headers,
    payload: { system_user_id: 'private-learner', system_uuid: system, full_name: 'Private Person' },
  })
  t.equal(made.statusCode, 201)
  const lineCount = lines.length
  const res = await app.inject({
    method: 'DELETE',
    url: `/api/v1/user/${system}/private-learner`,
    headers: { 'x-api-key': 'plain-key' },
  })
  t.equal(res.statusCode, 200)
  const line = lines.find((l) => l.msg === 'learner erased')
  t.match(line, { key_id: /^key-[0-9a-f]{12}$/, erased: { users: 1, stored_answers: 1 } })
  const erasureLines = JSON.stringify(lines.slice(lineCount))
  t.notMatch(erasureLines, /private-learner|Private Person/, 'the learner is in no log line of the erasure')
  t.notMatch(erasureLines, new RegExp(system), 'nor its system')
})

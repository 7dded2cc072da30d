// Error log: create (optionally linked), list newest first with keyset pages.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { buildTestApp, newKey } from '../helpers/app.js'
import { createConspectus, createOwner, ownerQuery } from '../helpers/fixtures.js'

const api = await buildTestApp(t)

t.test('create stores a message, optionally linked to a conspectus, with context', async (t) => {
  const owner = await createOwner(api)
  const note = await createConspectus(api, owner)
  const res = await api.post('/api/v1/errors', {
    ...owner,
    message: 'Mixed up stages',
    conspectus_uuid: note.conspectus_uuid,
    context: { quiz: 3, tags: ['a'] },
  })
  t.equal(res.statusCode, 201)
  t.match(res.json(), {
    ...owner,
    message: 'Mixed up stages',
    conspectus_uuid: note.conspectus_uuid,
    context: { quiz: 3, tags: ['a'] },
    error_log_uuid: String,
    created_at: String,
  })
  const bare = await api.post('/api/v1/errors', { ...owner, message: 'No link', conspectus_uuid: null })
  t.match(bare.json(), { conspectus_uuid: null, context: null })
})

t.test('an unknown owner is 404 USER_404; an unknown conspectus 404 CONS_404', async (t) => {
  const ghost = { system_user_id: 'ghost', system_uuid: randomUUID() }
  t.equal((await api.post('/api/v1/errors', { ...ghost, message: 'm' })).json().code, 'USER_404')
  t.equal((await api.get(`/api/v1/errors?${ownerQuery(ghost)}`)).json().code, 'USER_404')
  const owner = await createOwner(api)
  t.equal(
    (await api.post('/api/v1/errors', { ...owner, message: 'm', conspectus_uuid: randomUUID() })).json().code,
    'CONS_404',
  )
})

t.test('create is idempotent', async (t) => {
  const owner = await createOwner(api)
  const key = newKey()
  const first = await api.post('/api/v1/errors', { ...owner, message: 'once' }, key)
  const again = await api.post('/api/v1/errors', { ...owner, message: 'once' }, key)
  t.equal(again.headers['idempotent-replayed'], 'true')
  t.same(again.json(), first.json())
  const page = await api.get(`/api/v1/errors?${ownerQuery(owner)}`)
  t.equal(page.json().items.length, 1)
})

t.test('pages walk every row exactly once, newest first', async (t) => {
  const owner = await createOwner(api)
  const other = await createOwner(api)
  const note = await createConspectus(api, owner)
  const ids: string[] = []
  for (let i = 0; i < 23; i++) {
    const res = await api.post('/api/v1/errors', {
      ...owner,
      message: `m${i}`,
      conspectus_uuid: i % 3 === 0 ? note.conspectus_uuid : null,
    })
    ids.push(res.json().error_log_uuid)
  }
  await api.post('/api/v1/errors', { ...other, message: 'not yours' })
  // Rows with identical created_at must still be ordered and paged exactly once.
  await api.db
    .sql`update error_logs set created_at = '2026-01-01T00:00:00Z' where error_log_uuid = any(${ids.slice(5, 12)}::uuid[])`
  // So must rows apart by microseconds within one millisecond (a cursor keeps microseconds).
  for (const [i, id] of ids.slice(12, 18).entries())
    await api.db
      .sql`update error_logs set created_at = ${`2026-01-02T00:00:00.000${i + 1}00Z`}::text::timestamptz where error_log_uuid = ${id}`
  const seen: string[] = []
  let cursor: string | null = null
  let pages = 0
  do {
    const res = await api.get(`/api/v1/errors?${ownerQuery(owner)}&limit=5${cursor ? `&cursor=${cursor}` : ''}`)
    const body = res.json()
    seen.push(...body.items.map((i: { error_log_uuid: string }) => i.error_log_uuid))
    cursor = body.next_cursor
    pages++
  } while (cursor)
  t.equal(pages, 5)
  t.equal(seen.length, 23)
  t.equal(new Set(seen).size, 23, 'no row twice')
  t.same(new Set(seen), new Set(ids), 'every row, none of another user')
  const rows = await api.db.sql<{ id: string }[]>`
    select error_log_uuid::text as id from error_logs e join users u on u.client_uuid = e.user_id
    where u.system_user_id = ${owner.system_user_id} order by e.created_at desc, e.error_log_uuid desc`
  t.same(
    seen,
    rows.map((r) => r.id),
    'newest first, ties by id',
  )

  const linked = await api.get(`/api/v1/errors?${ownerQuery(owner)}&conspectus_uuid=${note.conspectus_uuid}&limit=100`)
  t.equal(linked.json().items.length, 8)
  t.equal(linked.json().next_cursor, null)
})

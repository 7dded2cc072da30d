// Writes decided from the row as read and made by one statement with their answer's record
// (review, PATCH user: inOneStatement, src/idempotency/store.ts). What must hold: a write that
// meets a row changed after it was read writes nothing and decides again from the row as it is
// then (the answer shows that row); a decision that never writes ends in 409 with nothing stored;
// the answer is the row as PostgreSQL stores it (a uuid sent in upper case answers in lower case,
// as a read of it does).
import t from 'tap'
import { answerIdempotently, inOneStatement, MAX_DECISIONS } from '../../src/idempotency/index.js'
import type { IdempotentRequest } from '../../src/idempotency/request.js'
import { answerStore } from '../../src/idempotency/store.js'
import { AppError } from '../../src/errors.js'
import { buildTestApp, newKey } from '../helpers/app.js'
import { createTestDatabase } from '../helpers/database.js'
import { createConspectus, createOwner } from '../helpers/fixtures.js'
import { waitFor, within } from '../helpers/wait.js'

t.test('a review that meets its note changed after the read decides again from the note as it is', async (t) => {
  const api = await buildTestApp(t)
  const owner = await createOwner(api)
  const note = await createConspectus(api, owner, { title: 'before' })
  // Another writer holds the note's row: the review reads it (a read is not blocked), then its
  // UPDATE waits for that writer, which changes the title and commits.
  // Statements are timed by name (src/db/statement-names.ts): the review's write with its answer
  // (`with written as (update conspectuses ...) insert into idempotency_records ...`) is one
  // `UPDATE conspectuses`, and so is the other writer's update below.
  const timedWrites = async () => {
    const metrics = (await api.app.inject({ method: 'GET', url: '/metrics' })).body
    return Number(
      /^db_operation_duration_seconds_count\{operation="UPDATE conspectuses"\} (\d+)/m.exec(metrics)?.[1] ?? 0,
    )
  }
  const writesBefore = await timedWrites()
  const other = await api.db.sql.reserve()
  t.teardown(() => other.release())
  await other`begin`
  await other`select 1 from conspectuses where conspectus_uuid = ${note.conspectus_uuid} for update`
  const review = api.post(`/api/v1/conspectuses/${note.conspectus_uuid}/actions/review`, {
    ...owner,
    outcome: 'remembered',
  })
  await waitFor(
    'the review waiting on the row',
    async () =>
      (
        await api.db
          .sql`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%update conspectuses%'`
      ).length > 0,
  )
  await other`update conspectuses set title = 'changed meanwhile' where conspectus_uuid = ${note.conspectus_uuid}`
  await other`commit`
  const answer = await within('the review', review)
  t.equal(answer.statusCode, 200)
  t.equal(answer.json().title, 'changed meanwhile', 'the answer is the note as written, not as first read')
  t.equal(answer.json().slot, 'B')
  t.equal(answer.json().review_count, 1)
  const [stored] = await api.db.sql`
    select title, slot, review_count from conspectuses where conspectus_uuid = ${note.conspectus_uuid}`
  t.same(stored, { title: 'changed meanwhile', slot: 'B', review_count: 1 })
  const [record] = await api.db.sql<{ response_body: string }[]>`
    select response_body from idempotency_records where scope = ${`/api/v1/conspectuses/${note.conspectus_uuid}/actions/review`}`
  t.same(JSON.parse(record!.response_body), answer.json(), 'the stored answer is the one sent')
  t.equal(
    (await timedWrites()) - writesBefore,
    3,
    "the other writer's update and both statements of the review timed, the one that wrote nothing too",
  )
})

t.test('a PATCH with upper-case uuids answers them as stored, as a later read does', async (t) => {
  const api = await buildTestApp(t)
  const owner = await createOwner(api)
  const url = `/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`
  const reason = 'A1B2C3D4-E5F6-4A7B-8C9D-0E1F2A3B4C5D'
  const patched = await api.patch(url, { invalidation_reason_uuid: reason, is_row_invalid: 1 })
  t.equal(patched.statusCode, 200)
  t.equal(patched.json().invalidation_reason_uuid, reason.toLowerCase())
  const read = await api.request({ method: 'GET', url })
  t.same(patched.json(), read.json(), 'the answer equals the row read afterwards')
  const moved = owner.system_uuid.toUpperCase()
  const renamed = await api.patch(url, { system_uuid: moved })
  t.equal(renamed.statusCode, 200)
  t.equal(renamed.json().system_uuid, owner.system_uuid.toLowerCase())
})

t.test('a decision that never writes ends in 409 after MAX_DECISIONS lookups, with nothing stored', async (t) => {
  const { sql } = await createTestDatabase(t)
  const unused = () => Promise.reject(new Error('a write in one statement opens no transaction'))
  const db = answerStore({ sql, transaction: unused }, 24)
  let decisions = 0
  const request: IdempotentRequest = {
    keyId: 'k',
    scope: '/api/v1/conspectuses/00000000-0000-4000-8000-000000000000/actions/review',
    key: 'never-writes',
    hash: 'hash of the body',
    serialize: (_status, body) => JSON.stringify(body),
  }
  const refused = await answerIdempotently(db, request, {
    read: sql`select 1 as one`,
    take: () => ({}),
    store: () => {
      decisions++
      // A write that finds its row changed every time: it returns no row.
      return inOneStatement(db, request, { status: 200, body: {}, statement: sql`select 1 where false` })
    },
  }).catch((err: unknown) => err)
  t.ok(refused instanceof AppError)
  t.equal((refused as AppError).key, 'CONCURRENT_UPDATE')
  t.equal(decisions, MAX_DECISIONS)
  const [records] = await sql<{ n: number }[]>`select count(*)::int as n from idempotency_records`
  t.equal(records!.n, 0)
})

t.test('an expired record under the key: removed, and the write decided again and made', async (t) => {
  const api = await buildTestApp(t)
  const owner = await createOwner(api)
  const url = `/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`
  const key = newKey()
  t.equal((await api.patch(url, { username: 'first' }, key)).statusCode, 200)
  await api.db
    .sql`update idempotency_records set expires_at = now() - interval '1 second' where idempotency_key = ${key}`
  const again = await api.patch(url, { username: 'second' }, key)
  t.equal(again.statusCode, 200)
  t.notOk(again.headers['idempotent-replayed'], 'written, not replayed')
  t.equal(again.json().username, 'second')
  const [record] = await api.db.sql<{ response_body: string; live: boolean }[]>`
    select response_body, expires_at > now() as live from idempotency_records where idempotency_key = ${key}`
  t.equal(record!.live, true)
  t.same(JSON.parse(record!.response_body), again.json())
  const replay = await api.patch(url, { username: 'second' }, key)
  t.equal(replay.headers['idempotent-replayed'], 'true')
})

// What the service reads from postgres.js's `postgres:query` channel (src/db/statement-channel.ts)
// with its own client options: each statement's text with $n placeholders and its times, never
// its parameter values (the client runs without `debug`), and a failure with its SQLSTATE.
import t from 'tap'
import { createClient } from '../../src/db/client.js'
import { type StatementContext, watchStatements } from '../../src/db/statement-channel.js'
import { createTestDatabase } from '../helpers/database.js'

t.test('a statement is published with its text and times, never its values', async (t) => {
  const db = await createTestDatabase(t)
  const sql = createClient(db.url, { max: 1 })
  t.teardown(() => sql.end({ timeout: 1 }))
  const started: StatementContext[] = []
  const settled: StatementContext[] = []
  const failed: StatementContext[] = []
  const stop = watchStatements({
    start: (s) => started.push(s),
    error: (s) => failed.push(s),
    asyncEnd: (s) => settled.push({ ...s }),
  })
  t.teardown(stop)
  const secret = `secret-${Math.random()}`
  await sql`select ${secret}::text as value`
  await t.rejects(sql`select ${secret}::uuid`, { code: '22P02' })
  stop()
  await sql`select 1`

  t.equal(started.length, 2, 'two statements started, none after the unsubscribe')
  t.equal(settled.length, 2, 'and both settled')
  t.same(
    settled.map((s) => s.query),
    ['select $1::text as value', 'select $1::uuid'],
    'the text sent, with placeholders',
  )
  t.ok(
    settled.every((s) => s.complete !== null && s.complete >= s.queued),
    'timed from made to answered',
  )
  t.equal(failed.length, 1)
  t.equal(failed[0]!.error?.code, '22P02', 'a failure carries its SQLSTATE')
  // (Its `result` holds the rows and its `error` the server's message, which may quote a value:
  // the service reads neither.)
  t.notOk(
    settled.some((s) => s.query?.includes(secret)),
    'no value in the text',
  )
  t.ok(
    settled.every((s) => (s as { parameters?: unknown }).parameters === undefined),
    'parameters are not published',
  )
})

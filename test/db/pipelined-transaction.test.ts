// inPipelinedTransaction: the closing statement (the idempotent answer's INSERT) must reach
// the connection before COMMIT, or a COMMIT could land without it. The driver's debug hook
// reports each statement as it is handed to the connection: the order is checked here.
import t from 'tap'
import postgres from 'postgres'
import { inPipelinedTransaction } from '../../src/db/transaction.js'
import type { Sql } from '../../src/db/client.js'
import { createRepositories } from '../../src/repositories/index.js'
import { insertAnswer } from '../../src/repositories/idempotency.js'
import { createTestDatabase } from '../helpers/database.js'

const db = await createTestDatabase(t)
const sent: string[] = []
const sql = postgres(db.url, {
  max: 2,
  onnotice: () => {},
  debug: (_connection, query) => sent.push(query.trim().split(/\s+/).slice(0, 2).join(' ').toLowerCase()),
}) as unknown as Sql
t.teardown(() => sql.end({ timeout: 5 }))
const database = {
  async reserve() {
    const connection = await sql.reserve()
    return { sql: connection as unknown as Sql, repos: createRepositories(connection as unknown as Sql, () => {}), release: () => connection.release() }
  },
}
const answer = (key: string) => ({ keyId: 'k', scope: '/t', key, hash: 'h', status: 201, body: '{}', ttlHours: 1 })

t.test('the closing INSERT is sent before COMMIT, whatever the work awaited', async (t) => {
  for (const awaits of [0, 1, 3]) {
    sent.length = 0
    const result = await inPipelinedTransaction(
      database,
      async (repos) => {
        for (let i = 0; i < awaits; i++) await repos.users.findByKey({ system_uuid: '00000000-0000-4000-8000-000000000000', system_user_id: `u${i}` })
        await new Promise((resolve) => setImmediate(resolve))
        return awaits
      },
      (tx, n) => insertAnswer(tx, answer(`order-${n}`)),
    )
    t.equal(result, awaits)
    const tail = sent.filter((s) => s === 'begin' || s.startsWith('insert') || s === 'commit' || s === 'rollback')
    t.same(tail, ['begin', 'insert into', 'commit'], `${awaits} awaited statements: ${sent.join(', ')}`)
  }
  t.equal((await sql`select count(*)::int as n from idempotency_records where scope = '/t'`)[0]!.n, 3)
})

t.test('a failing closing statement rolls the work back and is thrown', async (t) => {
  await t.rejects(
    inPipelinedTransaction(
      database,
      async (repos) => repos.users.create({ system_user_id: 'rolled-back', system_uuid: '00000000-0000-4000-8000-000000000001', full_name: 'R', username: null, timezone: 'UTC', is_row_invalid: 0, invalidation_reason_uuid: null }),
      (tx) => insertAnswer(tx, answer('order-0')), // taken above
    ),
    { code: '23505', constraint_name: 'idempotency_records_pkey' },
  )
  t.equal((await sql`select count(*)::int as n from users where system_user_id = 'rolled-back'`)[0]!.n, 0, 'the work is not committed')
})

t.test('a failing work rolls back and never sends the closing statement', async (t) => {
  sent.length = 0
  await t.rejects(inPipelinedTransaction(database, async () => { throw new Error('business') }, (tx) => insertAnswer(tx, answer('never'))), /business/)
  t.notOk(sent.some((s) => s.startsWith('insert')), 'no INSERT')
  t.ok(sent.includes('rollback'))
})

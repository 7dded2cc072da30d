// The due list, the summary and the error-log pages are index scans even with 100k
// conspectuses for one learner (plans read with EXPLAIN on seeded data).
import t from 'tap'
import postgres from 'postgres'
import { buildTestApp } from '../helpers/app.js'
import { createOwner } from '../helpers/fixtures.js'
import { dueNotesQuery } from '../../src/repositories/conspectuses.js'

const api = await buildTestApp(t)
// Seeding 500k rows can outlast the service's statement_timeout on a loaded machine.
const sql = postgres(api.db.url, { max: 1, onnotice: () => {} })
t.teardown(() => sql.end())
const owner = await createOwner(api)
const other = await createOwner(api)
const [{ client_uuid: userId }] =
  (await sql`select client_uuid from users where system_user_id = ${owner.system_user_id}`) as unknown as [
    { client_uuid: string },
  ]

// 100k notes for the learner among 500k, due times spread over a year.
for (const [who, count] of [
  [owner, 100_000],
  [other, 400_000],
] as const) {
  await sql`
    insert into conspectuses (user_id, cue_sheet, dense_paragraph, slot, next_review_at, created_at, updated_at)
    select u.client_uuid, '{}'::jsonb, 'p', (array['A','B','C','D'])[1 + i % 4],
           timestamptz '2026-01-01' + (i % 365) * interval '1 day', now(), now()
    from users u, generate_series(1, ${count}) as i
    where u.system_user_id = ${who.system_user_id}`
}
await sql`
  insert into error_logs (user_id, message, created_at)
  select ${userId}, 'm', timestamptz '2026-01-01' + i * interval '1 second' from generate_series(1, 20000) as i`
// vacuum sets the visibility map, as autovacuum would on a live table.
await sql`vacuum analyze conspectuses`
await sql`vacuum analyze error_logs`

type PlanNode = { 'Node Type': string; 'Relation Name'?: string; 'Index Name'?: string; Plans?: PlanNode[] }
function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)]
}
async function explain(query: string) {
  const [row] = await sql.unsafe(`explain (format json) ${query}`)
  return nodes((row as unknown as { 'QUERY PLAN': [{ Plan: PlanNode }] })['QUERY PLAN'][0].Plan)
}

t.test('the due list reads a range of the conspectuses_due index', async (t) => {
  // The repository's own statement, explained with its parameters.
  const asOf = new Date('2026-06-01T00:00:00Z')
  const statement = (await dueNotesQuery(sql, owner, asOf, 50).describe()) as unknown as { string: string }
  const [row] = await sql.unsafe(`explain (format json) ${statement.string}`, [
    asOf.toISOString(),
    50,
    owner.system_uuid,
    owner.system_user_id,
  ])
  const root = (row as unknown as { 'QUERY PLAN': [{ Plan: PlanNode }] })['QUERY PLAN'][0].Plan
  const plan = nodes(root)
  const limit = plan.find((n) => n['Node Type'] === 'Limit')
  t.ok(limit, "the learner's notes are cut at the limit")
  t.ok(
    nodes(limit!).some((n) => n['Index Name'] === 'conspectuses_due'),
    'read from conspectuses_due',
  )
  t.notOk(
    nodes(limit!).some((n) => n['Node Type'] === 'Sort'),
    'no sort under the limit: the index gives the order (a sort above it sees at most the limit)',
  )
  t.notOk(
    plan.some((n) => n['Node Type'] === 'Seq Scan'),
    'no sequential scan',
  )
})

t.test('the summary is an index-only scan of the learner range', async (t) => {
  const plan = await explain(`
    select count(*), count(*) filter (where next_review_at <= now()), count(*) filter (where slot = 'A')
    from conspectuses where user_id = '${userId}'`)
  t.ok(
    plan.some((n) => n['Node Type'] === 'Index Only Scan' && n['Index Name'] === 'conspectuses_due'),
    `index-only scan: ${plan.map((n) => n['Node Type']).join(' > ')}`,
  )
})

t.test('an error-log page reads the error_logs_page index in order', async (t) => {
  const plan = await explain(`
    select * from error_logs where user_id = '${userId}'
      and (created_at, error_log_uuid) < ('2026-01-01T03:00:00Z'::timestamptz, '00000000-0000-0000-0000-000000000000'::uuid)
    order by created_at desc, error_log_uuid desc limit 21`)
  t.ok(
    plan.some((n) => n['Index Name'] === 'error_logs_page'),
    'uses error_logs_page',
  )
  t.notOk(
    plan.some((n) => n['Node Type'] === 'Sort'),
    'no sort',
  )
})

t.test('through the API: due list and summary over 100k notes', async (t) => {
  const q = `system_user_id=${owner.system_user_id}&system_uuid=${owner.system_uuid}&as_of=2026-01-02T00:00:00Z`
  const due = await api.get(`/api/v1/conspectuses/due?${q}&limit=200`)
  t.equal(due.json().length, 200)
  const summary = (await api.get(`/api/v1/schedule/summary?${q}`)).json()
  t.equal(summary.total, 100_000)
  t.same(summary.slots, { A: 25_000, B: 25_000, C: 25_000, D: 25_000 })
  // due by 2026-01-02: i % 365 in {0, 1} for i in 1..100000 -> 273 + 274
  t.equal(summary.due_now_count, 547)
})

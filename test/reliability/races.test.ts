// Concurrency: 50 identical requests with one Idempotency-Key on every idempotent route make
// exactly one effect and 50 equal answers; different bodies on one key: one wins, the rest 409.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { buildTestApp, newKey, type TestApi } from '../helpers/app.js'
import { conspectusBody, createConspectus, createOwner } from '../helpers/fixtures.js'

const api = await buildTestApp(t)
const sql = api.db.sql
const N = 50

interface RaceCase {
  name: string
  /** Builds the request (fresh data per run) and a probe of its effect. */
  prepare(api: TestApi): Promise<{
    method: 'POST' | 'PUT' | 'PATCH'
    url: string
    body: (variant: number) => Record<string, unknown>
    effect: () => Promise<unknown>
    expected: unknown
    /** How many distinct valid bodies the route has (default 10). */
    variants?: number
  }>
}

const cases: RaceCase[] = [
  {
    name: 'create user',
    async prepare() {
      const base = { system_user_id: `r-${randomUUID().slice(0, 8)}`, system_uuid: randomUUID(), full_name: 'Racer' }
      return {
        method: 'POST',
        url: '/api/v1/user',
        body: (v) => ({ ...base, full_name: `Racer ${v}` }),
        effect: async () =>
          (await sql`select count(*)::int as n from users where system_user_id = ${base.system_user_id}`)[0]!.n,
        expected: 1,
      }
    },
  },
  {
    name: 'PUT user',
    async prepare(api) {
      const owner = await createOwner(api)
      const url = `/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`
      return {
        method: 'PUT',
        url,
        body: (v) => ({ full_name: `Put ${v}`, timezone: 'UTC' }),
        effect: async () => (await sql`select count(*)::int as n from idempotency_records where scope = ${url}`)[0]!.n,
        expected: 1,
      }
    },
  },
  {
    name: 'PATCH user',
    async prepare(api) {
      const owner = await createOwner(api)
      const url = `/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`
      return {
        method: 'PATCH',
        url,
        body: (v) => ({ username: `patched-${v}` }),
        effect: async () =>
          (await sql`select count(*)::int as n from idempotency_records where scope = ${`PATCH ${url}`}`)[0]!.n,
        expected: 1,
      }
    },
  },
  {
    name: 'create conspectus',
    async prepare(api) {
      const owner = await createOwner(api)
      return {
        method: 'POST',
        url: '/api/v1/conspectuses',
        body: (v) => conspectusBody(owner, { title: `t${v}` }),
        effect: async () =>
          (
            await sql`select count(*)::int as n from conspectuses c join users u on u.client_uuid = c.user_id where u.system_user_id = ${owner.system_user_id}`
          )[0]!.n,
        expected: 1,
      }
    },
  },
  {
    name: 'review conspectus',
    async prepare(api) {
      const owner = await createOwner(api)
      const note = await createConspectus(api, owner)
      return {
        method: 'POST',
        url: `/api/v1/conspectuses/${note.conspectus_uuid}/actions/review`,
        body: (v) => ({ ...owner, outcome: v === 0 ? 'remembered' : 'forgot' }),
        effect: async () =>
          (await sql`select review_count from conspectuses where conspectus_uuid = ${note.conspectus_uuid}`)[0],
        expected: { review_count: 1 },
        variants: 2,
      }
    },
  },
  {
    name: 'create error log',
    async prepare(api) {
      const owner = await createOwner(api)
      return {
        method: 'POST',
        url: '/api/v1/errors',
        body: (v) => ({ ...owner, message: `m${v}` }),
        effect: async () =>
          (
            await sql`select count(*)::int as n from error_logs e join users u on u.client_uuid = e.user_id where u.system_user_id = ${owner.system_user_id}`
          )[0]!.n,
        expected: 1,
      }
    },
  },
]

for (const race of cases) {
  t.test(`${race.name}: ${N} identical concurrent requests make one effect`, async (t) => {
    const r = await race.prepare(api)
    const key = newKey()
    const answers = await Promise.all(
      Array.from({ length: N }, () =>
        api.request({ method: r.method, url: r.url, payload: r.body(0), headers: { 'idempotency-key': key } }),
      ),
    )
    t.equal(new Set(answers.map((a) => a.statusCode)).size, 1, 'one status for all')
    t.ok(answers[0]!.statusCode < 300, `success: ${answers[0]!.statusCode}`)
    t.equal(new Set(answers.map((a) => a.body)).size, 1, 'one body for all')
    t.equal(answers.filter((a) => a.headers['idempotent-replayed'] === 'true').length, N - 1)
    t.same(await r.effect(), r.expected)
  })

  t.test(`${race.name}: different bodies on one key: one wins, the others 409`, async (t) => {
    const r = await race.prepare(api)
    const key = newKey()
    const variants = r.variants ?? 10
    const answers = await Promise.all(
      Array.from({ length: variants }, (_, v) =>
        api.request({ method: r.method, url: r.url, payload: r.body(v), headers: { 'idempotency-key': key } }),
      ),
    )
    const statuses = answers.map((a) => a.statusCode)
    t.equal(statuses.filter((s) => s < 300).length, 1, 'one success')
    t.equal(statuses.filter((s) => s === 409).length, variants - 1, 'the others conflict')
    for (const a of answers.filter((x) => x.statusCode === 409))
      t.equal(a.json().key, 'IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_PAYLOAD')
    t.same(await r.effect(), r.expected)
  })
}

t.test('concurrent creates of one natural key with different keys: one 201, the rest 400 USER_101', async (t) => {
  const body = { system_user_id: `nk-${randomUUID().slice(0, 8)}`, system_uuid: randomUUID(), full_name: 'Twin' }
  const answers = await Promise.all(Array.from({ length: N }, () => api.post('/api/v1/user', body)))
  const statuses = answers.map((a) => a.statusCode)
  t.equal(statuses.filter((s) => s === 201).length, 1)
  t.equal(statuses.filter((s) => s === 400).length, N - 1)
  for (const a of answers.filter((x) => x.statusCode === 400)) t.equal(a.json().code, 'USER_101')
  const [{ n }] =
    (await sql`select count(*)::int as n from users where system_user_id = ${body.system_user_id}`) as unknown as [
      { n: number },
    ]
  t.equal(n, 1)
})

t.test(
  'concurrent reviews of one note with different keys each move it one slot: A -> B, C, D in some order',
  async (t) => {
    const owner = await createOwner(api)
    const note = await createConspectus(api, owner)
    const url = `/api/v1/conspectuses/${note.conspectus_uuid}/actions/review`
    const answers = await Promise.all(
      Array.from({ length: 3 }, () => api.post(url, { ...owner, outcome: 'remembered' })),
    )
    t.same(
      answers.map((a) => a.statusCode),
      [200, 200, 200],
    )
    t.same(answers.map((a) => a.json().slot).sort(), ['B', 'C', 'D'], 'each review saw the slot the previous one left')
    t.same(answers.map((a) => a.json().review_count).sort(), [1, 2, 3])
    const [stored] =
      await sql`select slot, review_count from conspectuses where conspectus_uuid = ${note.conspectus_uuid}`
    t.same(stored, { slot: 'D', review_count: 3 })
  },
)

t.test(
  'concurrent telemetry batches over the same query ids: all stored, the query rollup matches the events',
  async (t) => {
    await sql`truncate docs_search_events, docs_search_queries`
    const ids = Array.from({ length: 12 }, (_, i) => `race-q${i}`)
    // Each batch lists the shared ids in its own order; the rollup must not deadlock on them.
    const batch = (b: number) => ({
      events: Array.from({ length: 60 }, (_, i) => ({
        event: i % 3 === 0 ? 'search_result_click' : 'search_query',
        emitted_at_ms: 1_795_000_000_000 + b * 1000 + i,
        query_id: ids[(i * 7 + b * 5) % ids.length],
        results_count: (i + b) % 3,
        time_to_success_ms: (i * b) % 4 === 0 ? 100 + i + b : 0,
      })),
    })
    const answers = await Promise.all(
      Array.from({ length: N }, (_, b) =>
        api.request({ method: 'POST', url: '/api/v1/telemetry/docs-search/batch', payload: batch(b) }),
      ),
    )
    t.same([...new Set(answers.map((r) => r.statusCode))], [202])
    const differences = await sql`
    (select query_id, min(emitted_at_ms) as first_ms, max(emitted_at_ms) as last_ms,
            count(*) filter (where event = 'search_query')::int as queries,
            count(*) filter (where event = 'search_query' and results_count = 0)::int as zero_result_queries,
            bool_or(event = 'search_result_click') as has_click,
            min(time_to_success_ms) filter (where time_to_success_ms > 0) as first_success_ms
     from docs_search_events group by query_id
     except
     select query_id, first_ms, last_ms, queries, zero_result_queries, has_click, first_success_ms from docs_search_queries)
    union all
    (select query_id, first_ms, last_ms, queries, zero_result_queries, has_click, first_success_ms from docs_search_queries
     except
     select query_id, min(emitted_at_ms), max(emitted_at_ms),
            count(*) filter (where event = 'search_query')::int,
            count(*) filter (where event = 'search_query' and results_count = 0)::int,
            bool_or(event = 'search_result_click'),
            min(time_to_success_ms) filter (where time_to_success_ms > 0)
     from docs_search_events group by query_id)`
    t.equal((await sql`select count(*)::int as n from docs_search_events`)[0]!.n, N * 60)
    t.equal((await sql`select count(*)::int as n from docs_search_queries`)[0]!.n, ids.length)
    t.same(differences, [], 'one rollup row per query id, equal to its events')
  },
)

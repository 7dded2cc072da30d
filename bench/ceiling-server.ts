// The "ceiling": an expert's version of each benchmarked route on bare Fastify 5 + postgres.js,
// the same semantics in the fewest round trips and with the contract's response schemas for
// serialisation. No auth, no rate limit, no request validation, no metrics, no logging. Same
// URLs as the service, plus /replay/api/v1/user (below). The rules: docs/performance.md, "Method".
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import Fastify from 'fastify'
import postgres from 'postgres'
import { projectRoot } from '../src/paths.js'
import { reviewMoves } from '../src/schedule/leitner.js'

const sql = postgres(process.env.DATABASE_URL!, { max: 10, onnotice: () => {} })
const app = Fastify({ logger: false })
const TTL_HOURS = 24
const DAY_MS = 86_400_000

// The contract's schemas, referenced as `spec#/components/schemas/<name>`: Fastify compiles the
// response serialisers from them, as it would for an expert's own schemas.
const spec = JSON.parse(readFileSync(path.join(projectRoot, 'generated/openapi.json'), 'utf8'))
app.addSchema({ $id: 'spec', components: { schemas: spec.components.schemas } })
const schema = (name: string) => ({ $ref: `spec#/components/schemas/${name}` })

interface UserKey {
  system_uuid: string
  system_user_id: string
}
type StoredAnswer = { status_code: number; response_body: string } | undefined

/** The unexpired answer stored for a key: what makes a write idempotent, read before it. */
const storedAnswer = (scope: string, key: string) =>
  sql`select status_code, response_body from idempotency_records
      where key_id = 'ceiling' and scope = ${scope} and idempotency_key = ${key}
        and expires_at > now() and status_code is not null`

/** `write` (returning a row when it wrote), what goes `alongside` it and its answer's record, as one statement. */
const writeWithAnswer = (
  write: postgres.PendingQuery<postgres.Row[]>,
  scope: string,
  key: string,
  status: number,
  json: string,
  alongside?: postgres.PendingQuery<postgres.Row[]>,
) =>
  sql`with written as (${write})${alongside ? sql`, alongside as (${alongside})` : sql``}
      insert into idempotency_records (key_id, scope, idempotency_key, request_hash, status_code, response_body, expires_at)
      select 'ceiling', ${scope}, ${key}, 'h', ${status}, ${json}, now() + make_interval(hours => ${TTL_HOURS}) from written`

app.get<{ Params: UserKey }>(
  '/api/v1/user/:system_uuid/:system_user_id',
  { schema: { response: { 200: schema('UserResponse') } } },
  async (req, reply) => {
    const [u] =
      await sql`select * from users where system_uuid = ${req.params.system_uuid} and system_user_id = ${req.params.system_user_id}`
    return u ?? reply.code(404).send({ error: 'not found' })
  },
)

// A new learner: the stored answer looked up, then the learner and its answer in one statement.
app.post<{ Body: UserKey & { full_name: string; timezone: string } }>(
  '/api/v1/user',
  { schema: { response: { 201: schema('UserResponse') } } },
  async (req, reply) => {
    const key = req.headers['idempotency-key'] as string
    const [stored] = (await storedAnswer('/api/v1/user', key)) as unknown as [StoredAnswer]
    if (stored) return reply.code(stored.status_code).type('application/json').send(stored.response_body)
    const at = new Date().toISOString()
    const b = req.body
    const user = {
      client_uuid: randomUUID(),
      system_user_id: b.system_user_id,
      system_uuid: b.system_uuid,
      full_name: b.full_name,
      username: null,
      timezone: b.timezone,
      is_row_invalid: 0,
      invalidation_reason_uuid: null,
      created_at: at,
      updated_at: at,
    }
    const json = reply.code(201).serialize(user) as string
    const written = await writeWithAnswer(
      sql`insert into users (client_uuid, system_user_id, system_uuid, full_name, timezone, created_at, updated_at)
          values (${user.client_uuid}, ${user.system_user_id}, ${user.system_uuid}, ${user.full_name}, ${user.timezone}, ${at}, ${at})
          on conflict do nothing returning 1`,
      '/api/v1/user',
      key,
      201,
      json,
    )
    if (written.count !== 1) return reply.code(400).send({ error: 'system key taken' })
    return reply.type('application/json').send(json)
  },
)

// A replay on the bare stack: the JSON body parsed, the stored answer read by its primary key and
// sent as it is. No validation, no request hash. The floor for "a replay costs no more than a read".
// The answer is the one the service stored for the bench's key: REPLAY_KEY_ID is that key's id.
const replayKeyId = process.env.REPLAY_KEY_ID ?? ''
app.post<{ Body: Record<string, unknown> }>('/replay/api/v1/user', async (req, reply) => {
  const key = req.headers['idempotency-key'] as string
  const [stored] =
    await sql`select status_code, response_body from idempotency_records where key_id = ${replayKeyId} and scope = '/api/v1/user' and idempotency_key = ${key} and expires_at > now() and status_code is not null`
  // No stored answer is the bench's own mistake: a 404 the harness counts, never a cheap throw.
  if (!stored) return reply.code(404).send({ error: 'no stored answer' })
  return reply.code(stored.status_code).type('application/json').send(stored.response_body)
})

// A change of a learner: the stored answer and the row (with its version) read in one statement,
// the new row decided here, written with its answer in one statement if the row is unchanged.
app.patch<{ Params: UserKey; Body: { username: string } }>(
  '/api/v1/user/:system_uuid/:system_user_id',
  { schema: { response: { 200: schema('UserResponse') } } },
  async (req, reply) => {
    const key = req.headers['idempotency-key'] as string
    const [row] = await sql`
      select a.status_code, a.response_body, u.*, u.xmin::text as version
      from (select) one
      left join idempotency_records a on a.key_id = 'ceiling' and a.scope = 'ceiling-patch' and a.idempotency_key = ${key}
        and a.expires_at > now() and a.status_code is not null
      left join users u on u.system_uuid = ${req.params.system_uuid} and u.system_user_id = ${req.params.system_user_id}`
    if (row!.status_code) return reply.code(row!.status_code).type('application/json').send(row!.response_body)
    if (!row!.client_uuid) return reply.code(404).send({ error: 'not found' })
    const { status_code, response_body, version, ...current } = row!
    const at = new Date().toISOString()
    const json = reply.serialize({ ...current, username: req.body.username, updated_at: at }) as string
    const written = await writeWithAnswer(
      sql`update users set username = ${req.body.username}, updated_at = ${at}
          where client_uuid = ${current.client_uuid} and xmin = ${version}::text::xid returning 1`,
      'ceiling-patch',
      key,
      200,
      json,
    )
    if (written.count !== 1) return reply.code(409).send({ error: 'changed meanwhile' })
    return reply.type('application/json').send(json)
  },
)

// The due list: the learner and its due notes in one statement, a keyset cursor on a full page.
app.get<{ Querystring: UserKey & { limit?: string } }>(
  '/api/v1/conspectuses/due',
  { schema: { response: { 200: schema('ConspectusListResponse') } } },
  async (req, reply) => {
    const limit = Number(req.query.limit ?? 50)
    const rows = await sql`
      select c.conspectus_uuid, u.system_user_id, u.system_uuid, c.title, c.cue_sheet, c.dense_paragraph, c.bullets,
             c.slot, c.next_review_at, c.last_reviewed_at, c.review_count, c.created_at, c.updated_at,
             c.schedule_policy, c.desired_retention,
             case when c.fsrs_state is null then null else json_build_object('state', c.fsrs_state, 'stability',
               c.fsrs_stability, 'difficulty', c.fsrs_difficulty, 'reps', c.fsrs_reps, 'lapses', c.fsrs_lapses) end as memory
      from users u left join lateral (
        select * from conspectuses where user_id = u.client_uuid and next_review_at <= now()
        order by next_review_at, conspectus_uuid limit ${limit}) c on true
      where u.system_uuid = ${req.query.system_uuid} and u.system_user_id = ${req.query.system_user_id}
      order by c.next_review_at, c.conspectus_uuid`
    if (rows.length === 0) return reply.code(404).send({ error: 'not found' })
    const items = rows[0]!.conspectus_uuid === null ? [] : rows
    const last = items.length === limit ? items.at(-1)! : undefined
    const next_cursor = last
      ? Buffer.from(JSON.stringify([last.next_review_at, last.conspectus_uuid])).toString('base64url')
      : null
    return { items, next_cursor }
  },
)

// A review: the stored answer, the learner and the note (with its version) read in one statement,
// the Leitner move decided here (the service's day rule), written with its review-log entry and its
// answer in one statement.
app.post<{ Params: { id: string }; Body: UserKey & { outcome: 'remembered' | 'forgot' } }>(
  '/api/v1/conspectuses/:id/actions/review',
  { schema: { response: { 200: schema('ConspectusResponse') } } },
  async (req, reply) => {
    const key = req.headers['idempotency-key'] as string
    const b = req.body
    const [row] = await sql`
      select a.status_code, a.response_body, u.client_uuid as owner, u.timezone, c.conspectus_uuid, u.system_user_id,
             u.system_uuid, c.title, c.cue_sheet, c.dense_paragraph, c.bullets, c.slot, c.next_review_at,
             c.last_reviewed_at, c.review_count, c.created_at, c.updated_at, c.schedule_policy, c.desired_retention,
             case when c.fsrs_state is null then null else json_build_object('state', c.fsrs_state, 'stability',
               c.fsrs_stability, 'difficulty', c.fsrs_difficulty, 'reps', c.fsrs_reps, 'lapses', c.fsrs_lapses) end as memory,
             c.xmin::text as version
      from (select) one
      left join idempotency_records a on a.key_id = 'ceiling' and a.scope = 'ceiling-review' and a.idempotency_key = ${key}
        and a.expires_at > now() and a.status_code is not null
      left join users u on u.system_uuid = ${b.system_uuid} and u.system_user_id = ${b.system_user_id}
      left join conspectuses c on c.user_id = u.client_uuid and c.conspectus_uuid = ${req.params.id}`
    if (row!.status_code) return reply.code(row!.status_code).type('application/json').send(row!.response_body)
    if (!row!.conspectus_uuid) return reply.code(404).send({ error: 'not found' })
    const { status_code, response_body, owner, timezone, version, ...note } = row!
    const at = new Date()
    const atText = at.toISOString()
    const move = reviewMoves(b.outcome, at, timezone)[note.slot as 'A']
    const json = reply.serialize({
      ...note,
      slot: move.slot,
      next_review_at: move.next_review_at,
      last_reviewed_at: atText,
      review_count: note.review_count + 1,
      updated_at: atText,
    }) as string
    const written = await writeWithAnswer(
      sql`update conspectuses set slot = ${move.slot}, next_review_at = ${move.next_review_at}, last_reviewed_at = ${atText},
            review_count = review_count + 1, updated_at = ${atText}
          where conspectus_uuid = ${note.conspectus_uuid} and user_id = ${owner} and xmin = ${version}::text::xid returning 1`,
      'ceiling-review',
      key,
      200,
      json,
      sql`insert into review_logs (user_id, conspectus_uuid, reviewed_at, outcome, schedule_policy, elapsed_days,
            scheduled_days, slot_before, slot_after, next_review_before, next_review_after)
          select ${owner}, ${note.conspectus_uuid}, ${atText}, ${b.outcome}, 'leitner',
            ${Math.max(0, Math.floor((at.getTime() - Date.parse(note.last_reviewed_at ?? note.created_at)) / DAY_MS))},
            ${Math.round((Date.parse(move.next_review_at) - at.getTime()) / DAY_MS)}, ${note.slot}, ${move.slot},
            ${note.next_review_at}, ${move.next_review_at}
          from written`,
    )
    if (written.count !== 1) return reply.code(409).send({ error: 'changed meanwhile' })
    return reply.type('application/json').send(json)
  },
)

app.post<{ Body: { events: Record<string, unknown>[] } }>('/api/v1/telemetry/docs-search/batch', async (req, reply) => {
  const rows = req.body.events.map((e) => ({
    event: e.event,
    emitted_at_ms: e.emitted_at_ms,
    query_id: e.query_id ?? '',
    results_count: e.results_count ?? 0,
  }))
  await sql`insert into docs_search_events ${sql(rows as never)}`
  return reply.code(202).send({ accepted: rows.length })
})

app.get('/live', async () => ({ status: 'alive', id: randomUUID() }))
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' })
// Exit normally on SIGTERM, so that a --cpu-prof profile is written.
process.once(
  'SIGTERM',
  () =>
    void app
      .close()
      .then(() => sql.end())
      .then(() => process.exit(0)),
)

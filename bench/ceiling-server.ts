// The "ceiling": plain Fastify 5 + postgres.js doing only the SQL each benchmarked route needs.
// No auth, no rate limit, no validation, no metrics, no logging. Same URLs as the service, plus
// /replay/api/v1/user (below).
import { randomUUID } from 'node:crypto'
import Fastify from 'fastify'
import postgres from 'postgres'

const sql = postgres(process.env.DATABASE_URL!, { max: 10, onnotice: () => {} })
const app = Fastify({ logger: false })

/**
 * The answer as JSON text, stored for its Idempotency-Key in the transaction: what the route sends.
 * Under a key id of its own: a record with the empty key id would tell the service that records
 * from before key ids are still live, and it would look those up too for the whole run.
 */
async function recordAnswer(
  tx: postgres.TransactionSql,
  scope: string,
  key: string,
  status: number,
  row: unknown,
): Promise<string> {
  const answer = JSON.stringify(row)
  await tx`insert into idempotency_records (key_id, scope, idempotency_key, request_hash, status_code, response_body, expires_at)
           values ('ceiling', ${scope}, ${key}, 'h', ${status}, ${answer}, now() + interval '1 day')`
  return answer
}

app.get<{ Params: { system_uuid: string; system_user_id: string } }>(
  '/api/v1/user/:system_uuid/:system_user_id',
  async (req) => {
    const [u] =
      await sql`select * from users where system_uuid = ${req.params.system_uuid} and system_user_id = ${req.params.system_user_id}`
    return u
  },
)

app.post<{ Body: { system_user_id: string; system_uuid: string; full_name: string; timezone: string } }>(
  '/api/v1/user',
  async (req, reply) => {
    const key = req.headers['idempotency-key'] as string
    const json = await sql.begin(async (tx) => {
      const [u] = await tx`insert into users (system_user_id, system_uuid, full_name, timezone)
                         values (${req.body.system_user_id}, ${req.body.system_uuid}, ${req.body.full_name}, ${req.body.timezone}) returning *`
      return recordAnswer(tx, '/api/v1/user', key, 201, u)
    })
    return reply.code(201).type('application/json').send(json)
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

app.patch<{ Params: { system_uuid: string; system_user_id: string }; Body: { username: string } }>(
  '/api/v1/user/:system_uuid/:system_user_id',
  async (req, reply) => {
    const key = req.headers['idempotency-key'] as string
    const json = await sql.begin(async (tx) => {
      const [u] = await tx`update users set username = ${req.body.username}, updated_at = now()
                         where system_uuid = ${req.params.system_uuid} and system_user_id = ${req.params.system_user_id} returning *`
      return recordAnswer(tx, 'ceiling-patch', key, 200, u)
    })
    return reply.type('application/json').send(json)
  },
)

app.get<{ Querystring: { system_user_id: string; system_uuid: string } }>('/api/v1/conspectuses/due', async (req) => {
  return sql`select c.* from conspectuses c join users u on u.client_uuid = c.user_id
             where u.system_user_id = ${req.query.system_user_id} and u.system_uuid = ${req.query.system_uuid} and c.next_review_at <= now()
             order by c.next_review_at, c.conspectus_uuid limit 50`
})

app.post<{ Params: { id: string } }>('/api/v1/conspectuses/:id/actions/review', async (req, reply) => {
  const key = req.headers['idempotency-key'] as string
  const json = await sql.begin(async (tx) => {
    const [c] =
      await tx`update conspectuses set slot = 'B', review_count = review_count + 1, last_reviewed_at = now(), next_review_at = now() + interval '3 days'
                         where conspectus_uuid = ${req.params.id} returning *`
    return recordAnswer(tx, 'ceiling-review', key, 200, c)
  })
  return reply.type('application/json').send(json)
})

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

// The export of one learner: the user, every note, every error log and every review, as one JSON document
// streamed while it is read. Memory stays flat whatever the learner holds: rows come from
// server-side cursors a batch at a time, and the next batch is fetched only when the reply has
// taken the previous one (the stream's backpressure). One REPEATABLE READ, READ ONLY transaction
// on a connection of its own gives the four parts one snapshot.
import { Readable } from 'node:stream'
import type { ReservedSql, Sql } from '../db/client.js'
import { MEMORY_SQL } from './conspectuses.js'
import { USER_COLUMN_LIST, type User, type UserKey } from './users.js'

/** Rows per cursor batch: a few hundred KB at typical note sizes, a few MB at the 84 KiB maximum. */
const BATCH_ROWS = 100
/** An export may outlast the service's 15 s statement timeout when its reader is slow, not forever. */
const EXPORT_STATEMENT_TIMEOUT = '10min'

/**
 * Opens the learner's export: undefined (and nothing held) when no user has the key, else the
 * JSON body as a byte stream. The connection is released when the stream ends or is destroyed
 * (the client went away), whether or not it was ever read.
 */
export async function openLearnerExport(pool: Sql, key: UserKey, exportedAt: Date): Promise<Readable | undefined> {
  const conn = await pool.reserve()
  let held = true
  const release = async () => {
    if (!held) return
    held = false
    try {
      await conn`rollback` // read only: nothing to keep
    } catch {
      // The connection may be broken already; the pool replaces it.
    } finally {
      conn.release()
    }
  }
  try {
    await conn`begin isolation level repeatable read read only`
    await conn`select set_config('statement_timeout', ${EXPORT_STATEMENT_TIMEOUT}, true)`
    const [user] = await conn<User[]>`
      select ${conn.unsafe(USER_COLUMN_LIST)} from users
      where system_uuid = ${key.system_uuid} and system_user_id = ${key.system_user_id}`
    if (!user) {
      await release()
      return undefined
    }
    let started = false
    const body = Readable.from(
      (async function* () {
        started = true
        try {
          yield* documentChunks(conn, user, exportedAt)
        } finally {
          await release()
        }
      })(),
      { objectMode: false },
    )
    // Destroyed before the first read: the generator never ran, so its finally will not.
    body.once('close', () => {
      if (!started) void release()
    })
    return body
  } catch (err) {
    await release()
    throw err
  }
}

async function* documentChunks(conn: ReservedSql, user: User & { client_uuid: string }, exportedAt: Date) {
  yield `{"exported_at":${JSON.stringify(exportedAt.toISOString())},"user":${JSON.stringify(user)},"conspectuses":[`
  yield* jsonArrayItems(
    conn`
      select c.conspectus_uuid, u.system_user_id, u.system_uuid, c.title, c.cue_sheet, c.dense_paragraph, c.bullets,
             c.slot, c.next_review_at, c.last_reviewed_at, c.review_count, c.created_at, c.updated_at,
             c.schedule_policy, c.desired_retention, ${conn.unsafe(MEMORY_SQL)} as memory
      from conspectuses c join users u on u.client_uuid = c.user_id
      where c.user_id = ${user.client_uuid}
      order by c.created_at, c.conspectus_uuid`.cursor(BATCH_ROWS),
  )
  yield '],"error_logs":['
  yield* jsonArrayItems(
    conn`
      select e.error_log_uuid, u.system_user_id, u.system_uuid, e.conspectus_uuid, e.message, e.context, e.created_at
      from error_logs e join users u on u.client_uuid = e.user_id
      where e.user_id = ${user.client_uuid}
      order by e.created_at, e.error_log_uuid`.cursor(BATCH_ROWS),
  )
  yield '],"review_logs":['
  yield* jsonArrayItems(
    conn`
      select review_uuid, conspectus_uuid, reviewed_at, outcome, schedule_policy, elapsed_days, scheduled_days,
             slot_before, slot_after, next_review_before, next_review_after, memory_before, memory_after
      from review_logs
      where user_id = ${user.client_uuid}
      order by reviewed_at, review_uuid`.cursor(BATCH_ROWS),
  )
  yield ']}'
}

/** The rows of a cursor as the comma-separated items of a JSON array, one chunk per batch. */
async function* jsonArrayItems(batches: AsyncIterable<readonly object[]>) {
  let first = true
  for await (const rows of batches) {
    let chunk = ''
    for (const row of rows) {
      chunk += first ? JSON.stringify(row) : `,${JSON.stringify(row)}`
      first = false
    }
    yield chunk
  }
}

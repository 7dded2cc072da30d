// The requests the benchmarks send, over the seeded data set: one builder per route case of the
// paired benchmark (run.ts), and the ingest benchmark's batch (ingest.ts).
import { randomUUID } from 'node:crypto'
import type postgres from 'postgres'
import { API_KEY, DUE_LIST_LEARNER } from './harness.js'

export interface BenchRequest {
  method: string
  path: string
  body?: string
  headers?: Record<string, string>
}

interface UserKey {
  system_user_id: string
  system_uuid: string
}

export const JSON_HEADERS = { 'x-api-key': API_KEY, 'content-type': 'application/json' }

const REPLAY_KEY = 'replay-key'

/** How a write's unique values are made: the placeholders wrk fills per request (bench/wrk.ts). */
export interface Uniques {
  id(): string
  uuid(): string
}

/**
 * Loads the seeded users and notes, stores one answer to replay, and returns the builders.
 * `uniques`: how Idempotency-Keys and new learners' ids are made.
 */
export async function createBenchRequests(sql: postgres.Sql, serviceBase: string, uniques: Uniques) {
  const users = await sql<UserKey[]>`select system_user_id, system_uuid from users order by system_user_id`
  const allNotes = await sql<(UserKey & { id: string; schedule_policy: string })[]>`
    select c.conspectus_uuid::text as id, u.system_user_id, u.system_uuid, c.schedule_policy
    from conspectuses c join users u on u.client_uuid = c.user_id`
  const notesOf = {
    leitner: allNotes.filter((c) => c.schedule_policy === 'leitner'),
    fsrs: allNotes.filter((c) => c.schedule_policy === 'fsrs'),
  }
  // User bodies carry a time zone, as a client's usually do.
  const replayBody = JSON.stringify({
    system_user_id: 'replay-user',
    system_uuid: randomUUID(),
    full_name: 'Replay',
    timezone: 'Europe/Berlin',
  })
  const stored = await fetch(`${serviceBase}/api/v1/user`, {
    method: 'POST',
    body: replayBody,
    headers: { ...JSON_HEADERS, 'idempotency-key': REPLAY_KEY },
  })
  if (stored.status !== 201) throw new Error(`storing the answer to replay: ${stored.status}`)

  let n = 0
  const nextUser = () => users[n++ % users.length]!
  const { id: unique, uuid } = uniques
  const replay = (path: string): BenchRequest => ({
    method: 'POST',
    path,
    body: replayBody,
    headers: { 'idempotency-key': REPLAY_KEY },
  })
  return {
    dueListLearner: users.find((u) => u.system_user_id === DUE_LIST_LEARNER)!,
    getUser(): BenchRequest {
      const u = nextUser()
      return { method: 'GET', path: `/api/v1/user/${u.system_uuid}/${u.system_user_id}` }
    },
    postNewUser(): BenchRequest {
      const id = unique()
      const body = JSON.stringify({
        system_user_id: `p${id}`.slice(0, 36),
        system_uuid: uuid(),
        full_name: 'New',
        timezone: 'Europe/Berlin',
      })
      return { method: 'POST', path: '/api/v1/user', body, headers: { 'idempotency-key': id } }
    },
    replayUser: () => replay('/api/v1/user'),
    /** The same replay, sent to the ceiling's bare-stack replay route. */
    replayUserOnCeiling: () => replay('/replay/api/v1/user'),
    patchUser(): BenchRequest {
      const u = nextUser()
      return {
        method: 'PATCH',
        path: `/api/v1/user/${u.system_uuid}/${u.system_user_id}`,
        body: JSON.stringify({ username: `n${n}` }),
        headers: { 'idempotency-key': unique() },
      }
    },
    dueList(owner: UserKey = nextUser()): BenchRequest {
      return {
        method: 'GET',
        path: `/api/v1/conspectuses/due?system_user_id=${owner.system_user_id}&system_uuid=${owner.system_uuid}&limit=50`,
      }
    },
    /** A review of a note of the policy (the harness seeds one FSRS note for most learners). */
    review(outcome: 'remembered' | 'forgot' = 'remembered', policy: 'leitner' | 'fsrs' = 'leitner'): BenchRequest {
      const notes = notesOf[policy]
      const note = notes[n++ % notes.length]!
      const body = JSON.stringify({ system_user_id: note.system_user_id, system_uuid: note.system_uuid, outcome })
      return {
        method: 'POST',
        path: `/api/v1/conspectuses/${note.id}/actions/review`,
        body,
        headers: { 'idempotency-key': unique() },
      }
    },
    /** One browser's batch: 50 searches of its own, each a query id with clicks and repeats. */
    telemetryBatch(): BenchRequest {
      const browser = unique()
      const now = Date.now()
      const events = Array.from({ length: 500 }, (_, i) => ({
        event: i % 3 ? 'search_query' : 'search_result_click',
        emitted_at_ms: now,
        query_id: `${browser}-q${i % 50}`,
        results_count: i % 5,
      }))
      return { method: 'POST', path: '/api/v1/telemetry/docs-search/batch', body: JSON.stringify({ events }) }
    },
  }
}

/**
 * The ingest benchmark's batch, shaped as the seeded events (bench/telemetry-seed.ts): one browser's
 * session of 125 searches (texts from 200), each a search_query, two clicks with a rank (two result
 * views for every fourth) and a search_success with a time to success; emitted when sent, with its
 * own Idempotency-Key. `variant` picks the texts; `id` and `nowMs` are wrk's placeholders.
 */
export function ingestBatch(variant: number, id: string, nowMs: string): BenchRequest {
  const events = Array.from({ length: 500 }, (_, i) => {
    const [s, k] = [i >> 2, i % 4]
    const base = { emitted_at_ms: nowMs, session_id: id, query_id: `${id}-${s}` }
    const rank = { event: s % 4 === 1 ? 'search_result_view' : 'search_result_click', result_rank: 1 + ((s + k) % 12) }
    const text = `query ${(variant * 125 + s) % 200}`
    if (k === 0) return { ...base, event: 'search_query', query_text: text, results_count: s % 5 }
    return { ...base, ...(k === 3 ? { event: 'search_success', time_to_success_ms: 300 + s * 7 } : rank) }
  })
  const body = JSON.stringify({ events }).replaceAll(`"${nowMs}"`, nowMs)
  return { method: 'POST', path: '/api/v1/telemetry/docs-search/batch', body, headers: { 'idempotency-key': id } }
}

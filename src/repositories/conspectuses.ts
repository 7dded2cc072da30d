// SQL for conspectuses (table conspectuses), always scoped to the owning user's client_uuid; the
// idempotent writes (POST and PATCH of a note, its review) answer with the note.
import type { Db } from '../db/client.js'
import type { components } from '../../generated/api.js'
import { appError } from '../errors.js'
import {
  type Answer,
  type AnswerStore,
  answerIdempotently,
  type IdempotentRequest,
  inOneStatement,
  inTransaction,
} from '../idempotency/index.js'
import type { FsrsMemory } from '../schedule/fsrs.js'
import type { Slot } from '../schedule/leitner.js'
import type { ReviewFacts, ReviewMove, SchedulePolicy } from '../schedule/policy.js'
import { type Owner, ownerQuery, takeOwner, type UserKey } from './users.js'
import { jsonb } from '../library-types.js'
import type { TimeKeyPosition as PagePosition } from '../pagination/cursor.js'
import { keysetPage } from '../pagination/keyset-page.js'
import { answerMissingParent } from './missing-parent.js'
import { rowVersion } from './row-version.js'

export type Conspectus = components['schemas']['ConspectusResponse']
export type ScheduleCounts = { total: number; due_now_count: number; slots: Record<Slot, number> }

/** What deleting a note did: false when it is not the user's (any more). */
export type Deletion = { deleted: false } | { deleted: true; unlinked_error_logs: number }

export interface NewConspectus {
  title: string | null
  cue_sheet: Record<string, unknown>
  dense_paragraph: string
  bullets: string[]
  slot: Slot
  next_review_at: Date
  created_at: Date
  schedule_policy: SchedulePolicy
  /** For an fsrs note: its desired retention and its (new) memory; null for a Leitner note. */
  desired_retention: number | null
  memory: FsrsMemory | null
}

export type ConspectusContent = Partial<Pick<NewConspectus, 'title' | 'cue_sheet' | 'dense_paragraph' | 'bullets'>>

// An fsrs note's memory columns as the response's `memory` object (null for a Leitner note).
export const MEMORY_SQL = `case when c.fsrs_state is null then null else json_build_object('state', c.fsrs_state,
    'stability', c.fsrs_stability, 'difficulty', c.fsrs_difficulty, 'reps', c.fsrs_reps, 'lapses', c.fsrs_lapses) end`

// The response shape (c: conspectuses, u: its owner), spliced into each query as a fragment.
const RESPONSE_COLUMNS_SQL = `c.conspectus_uuid, u.system_user_id, u.system_uuid, c.title, c.cue_sheet,
    c.dense_paragraph, c.bullets, c.slot, c.next_review_at, c.last_reviewed_at, c.review_count, c.created_at, c.updated_at,
    c.schedule_policy, c.desired_retention, ${MEMORY_SQL} as memory`

/**
 * A note as its review reads it, with its owner: the owner's columns (none when the owner is
 * missing), the note's response columns (null when it is not the owner's) and its version.
 */
export type ReviewedNoteRow = Owner & Partial<Conspectus> & { version: string | null }

const REVIEWED_NOTE_COLUMNS = `u.client_uuid, u.timezone, ${RESPONSE_COLUMNS_SQL}, ${rowVersion('c')} as version`
const NOTE_VERSION = rowVersion('conspectuses')

/**
 * The owner and the note, as a statement built but not sent (a review sends it inside its
 * answer lookup), with the version of the note's row (./row-version.ts).
 */
export function reviewedNoteQuery(db: Db, key: UserKey, conspectusUuid: string) {
  return db<ReviewedNoteRow[]>`
    select ${db.unsafe(REVIEWED_NOTE_COLUMNS)}
    from users u left join conspectuses c on c.user_id = u.client_uuid and c.conspectus_uuid = ${conspectusUuid}
    where u.system_uuid = ${key.system_uuid} and u.system_user_id = ${key.system_user_id}`
}

/** A note a review reads, with its owner and the version of its row. */
export interface ReviewedNote {
  owner: Owner
  row: Conspectus
  version: string
}

/** The read of a review: 404 USER_404 without the owner, CONS_404 without the note. */
export function takeReviewedNote(row: ReviewedNoteRow | undefined): ReviewedNote {
  if (!row) throw appError('USER_NOT_FOUND')
  if (row.conspectus_uuid == null || row.version == null) throw appError('CONSPECTUS_NOT_FOUND')
  return {
    owner: { client_uuid: row.client_uuid, timezone: row.timezone },
    row: {
      conspectus_uuid: row.conspectus_uuid,
      system_user_id: row.system_user_id!,
      system_uuid: row.system_uuid!,
      title: row.title ?? null,
      cue_sheet: row.cue_sheet!,
      dense_paragraph: row.dense_paragraph!,
      bullets: row.bullets!,
      slot: row.slot!,
      next_review_at: row.next_review_at!,
      last_reviewed_at: row.last_reviewed_at ?? null,
      review_count: row.review_count!,
      created_at: row.created_at!,
      updated_at: row.updated_at!,
      schedule_policy: row.schedule_policy!,
      desired_retention: row.desired_retention ?? null,
      memory: row.memory ?? null,
    },
    version: row.version,
  }
}

/**
 * A review's write, built but not sent: the note moved as `move` says, if its row is still the
 * version read (one row returned), else nothing (none).
 */
export function reviewStatement(
  db: Db,
  note: { user_id: string; conspectus_uuid: string; version: string },
  move: ReviewMove,
  at: string,
) {
  const memory = move.memory
  // Times go as text (`::text`): the driver formats a Date, or a parameter typed timestamptz, at each use.
  return db`
    update conspectuses
    set slot = ${move.slot}, next_review_at = ${move.next_review_at}::text::timestamptz,
        last_reviewed_at = ${at}::text::timestamptz, review_count = review_count + 1, updated_at = ${at}::text::timestamptz
        ${
          memory
            ? db`, fsrs_state = ${memory.state}, fsrs_stability = ${memory.stability}, fsrs_difficulty = ${memory.difficulty},
                 fsrs_reps = ${memory.reps}, fsrs_lapses = ${memory.lapses}`
            : db``
        }
    where conspectus_uuid = ${note.conspectus_uuid} and user_id = ${note.user_id}
      and ${db.unsafe(NOTE_VERSION)} = ${note.version}
    returning 1`
}

/**
 * The review's entry in the review log, built but not sent: it runs alongside reviewStatement
 * and reads that statement's returned row as `written`, so it is appended only when the note
 * moved (writeWithAnswer).
 */
export function reviewLogStatement(
  db: Db,
  note: { user_id: string; conspectus_uuid: string; before: ReviewMove },
  after: ReviewMove,
  facts: ReviewFacts,
  at: string,
) {
  const json = (memory: FsrsMemory | null) => (memory ? jsonb(db, memory) : null)
  return db`
    insert into review_logs (user_id, conspectus_uuid, reviewed_at, outcome, schedule_policy, elapsed_days,
      scheduled_days, slot_before, slot_after, next_review_before, next_review_after, memory_before, memory_after)
    select ${note.user_id}, ${note.conspectus_uuid}, ${at}::text::timestamptz, ${facts.outcome}, ${facts.schedule_policy},
      ${facts.elapsed_days}, ${facts.scheduled_days}, ${note.before.slot}, ${after.slot},
      ${note.before.next_review_at}::text::timestamptz, ${after.next_review_at}::text::timestamptz,
      ${json(note.before.memory)}, ${json(after.memory)}
    from written`
}

/**
 * The learner and its notes due at `asOf`, oldest due first (the conspectuses_due index), as a
 * statement built but not sent: no row when there is no such learner, one row without a note
 * when none is due. One statement, so one round trip.
 */
export function dueNotesQuery(db: Db, key: UserKey, asOf: Date, limit: number) {
  return db<(Conspectus | { conspectus_uuid: null })[]>`
    select ${db.unsafe(RESPONSE_COLUMNS_SQL)}
    from users u left join lateral (
      select * from conspectuses
      where user_id = u.client_uuid and next_review_at <= ${asOf}
      order by next_review_at, conspectus_uuid
      limit ${limit}
    ) c on true
    where u.system_uuid = ${key.system_uuid} and u.system_user_id = ${key.system_user_id}
    order by c.next_review_at, c.conspectus_uuid`
}

export function createConspectusRepository(db: Db) {
  const RESPONSE_COLUMNS = db.unsafe(RESPONSE_COLUMNS_SQL)

  return {
    /** Answers 404 USER_404 when the owner was erased after it was read. */
    async create(userId: string, c: NewConspectus): Promise<Conspectus> {
      const [row] = await db<Conspectus[]>`
        with c as (
          insert into conspectuses (user_id, title, cue_sheet, dense_paragraph, bullets, slot, next_review_at, created_at,
                                    updated_at, schedule_policy, desired_retention, fsrs_state, fsrs_stability,
                                    fsrs_difficulty, fsrs_reps, fsrs_lapses)
          values (${userId}, ${c.title}, ${jsonb(db, c.cue_sheet)}, ${c.dense_paragraph}, ${c.bullets},
                  ${c.slot}, ${c.next_review_at}, ${c.created_at}, ${c.created_at}, ${c.schedule_policy},
                  ${c.desired_retention}, ${c.memory?.state ?? null}, ${c.memory?.stability ?? null},
                  ${c.memory?.difficulty ?? null}, ${c.memory?.reps ?? null}, ${c.memory?.lapses ?? null})
          returning *
        )
        select ${RESPONSE_COLUMNS} from c join users u on u.client_uuid = c.user_id`.catch(answerMissingParent)
      return row!
    },

    /** The user's conspectus, or undefined when it is not the user's. */
    async find(userId: string, conspectusUuid: string): Promise<Conspectus | undefined> {
      const [row] = await db<Conspectus[]>`
        select ${RESPONSE_COLUMNS}
        from conspectuses c join users u on u.client_uuid = c.user_id
        where c.conspectus_uuid = ${conspectusUuid} and c.user_id = ${userId}`
      return row
    },

    /** Up to `limit` of the user's notes after `after` (exclusive), oldest first, plus the last one's position. */
    async page(userId: string, options: { slot?: Slot; after?: PagePosition; limit: number }) {
      const rows = await db<(Conspectus & { position_ts: string })[]>`
        select ${RESPONSE_COLUMNS},
               to_char(c.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as position_ts
        from conspectuses c join users u on u.client_uuid = c.user_id
        where c.user_id = ${userId}
          ${options.slot ? db`and c.slot = ${options.slot}` : db``}
          ${options.after ? db`and (c.created_at, c.conspectus_uuid) > (${options.after.created_at}::text::timestamptz, ${options.after.id}::uuid)` : db``}
        order by c.created_at, c.conspectus_uuid
        limit ${options.limit + 1}`
      return keysetPage(rows, options.limit, (row) => row.conspectus_uuid)
    },

    /**
     * Deletes the user's note in one statement; the error logs that pointed at it keep their
     * message and lose the link (the foreign key's ON DELETE SET NULL would do it too; the
     * UPDATE here counts them).
     */
    async delete(userId: string, conspectusUuid: string): Promise<Deletion> {
      const [row] = await db<{ deleted: number; unlinked: number }[]>`
        with gone as (
          delete from conspectuses where conspectus_uuid = ${conspectusUuid} and user_id = ${userId}
          returning conspectus_uuid
        ), unlinked as (
          update error_logs set conspectus_uuid = null
          where user_id = ${userId} and conspectus_uuid in (select conspectus_uuid from gone)
          returning 1
        )
        select (select count(*) from gone)::int as deleted, (select count(*) from unlinked)::int as unlinked`
      return row!.deleted === 1 ? { deleted: true, unlinked_error_logs: row!.unlinked } : { deleted: false }
    },

    async exists(userId: string, conspectusUuid: string): Promise<boolean> {
      const rows =
        await db`select 1 from conspectuses where conspectus_uuid = ${conspectusUuid} and user_id = ${userId}`
      return rows.length === 1
    },

    /** Changes content only; undefined when the conspectus is not the user's. */
    async updateContent(
      userId: string,
      conspectusUuid: string,
      content: ConspectusContent,
      at: Date,
    ): Promise<Conspectus | undefined> {
      const changes: Record<string, unknown> = { ...content, updated_at: at }
      if (content.cue_sheet !== undefined) changes.cue_sheet = jsonb(db, content.cue_sheet)
      const [row] = await db<Conspectus[]>`
        update conspectuses c set ${db(changes)}
        from users u
        where c.conspectus_uuid = ${conspectusUuid} and c.user_id = ${userId} and u.client_uuid = c.user_id
        returning ${RESPONSE_COLUMNS}`
      return row
    },

    /** The learner's notes due at `asOf` (dueNotesQuery), or undefined when there is no such learner. */
    async listDueOf(key: UserKey, asOf: Date, limit: number): Promise<Conspectus[] | undefined> {
      const rows = await dueNotesQuery(db, key, asOf, limit)
      if (rows.length === 0) return undefined
      return rows[0]!.conspectus_uuid === null ? [] : (rows as Conspectus[])
    },

    /** Slot histogram and due count in one index-only scan. */
    async scheduleCounts(userId: string, asOf: Date): Promise<ScheduleCounts> {
      const [row] = await db<{ total: number; due: number; a: number; b: number; c: number; d: number }[]>`
        select count(*)::int as total,
               count(*) filter (where next_review_at <= ${asOf})::int as due,
               count(*) filter (where slot = 'A')::int as a,
               count(*) filter (where slot = 'B')::int as b,
               count(*) filter (where slot = 'C')::int as c,
               count(*) filter (where slot = 'D')::int as d
        from conspectuses where user_id = ${userId}`
      return { total: row!.total, due_now_count: row!.due, slots: { A: row!.a, B: row!.b, C: row!.c, D: row!.d } }
    },
  }
}

export type ConspectusRepository = ReturnType<typeof createConspectusRepository>

/** A review's decision, made from the note as read: when, the note's move, and the facts logged. */
export interface ReviewDecision {
  at: Date
  move: ReviewMove
  facts: ReviewFacts
}

/** Times as the store is sent them: postgres.js reads a timestamptz as a Date, the types say string. */
const isoText = (at: string | Date) => (typeof at === 'string' ? at : at.toISOString())

/** The idempotent writes of notes (src/idempotency/): each read with its owner in its answer lookup. */
export function createConspectusWrites(db: AnswerStore) {
  return {
    /**
     * POST /api/v1/conspectuses: `decide` makes the note of its owner (once no answer is stored, so
     * that a key reused with another body is 409 first); inserted in one transaction with its
     * answer's record, the answer being the note as stored (jsonb, its id).
     */
    create(request: IdempotentRequest, owner: UserKey, decide: (owner: Owner) => NewConspectus): Promise<Answer> {
      return answerIdempotently(db, request, {
        read: ownerQuery(db.sql, owner),
        take: takeOwner,
        store: (owner: Owner) => {
          const note = decide(owner)
          return inTransaction(db, request, async (tx) => ({
            status: 201,
            body: await createConspectusRepository(tx).create(owner.client_uuid, note),
            learner: owner.client_uuid,
          }))
        },
      })
    },

    /** PATCH /api/v1/conspectuses/{conspectus_uuid}: the content changed with its answer's record, in one transaction. */
    changeContent(
      request: IdempotentRequest,
      owner: UserKey,
      conspectusUuid: string,
      content: ConspectusContent,
      now: () => Date,
    ): Promise<Answer> {
      return answerIdempotently(db, request, {
        read: ownerQuery(db.sql, owner),
        take: takeOwner,
        store: (owner: Owner) =>
          inTransaction(db, request, async (tx) => {
            const updated = await createConspectusRepository(tx).updateContent(
              owner.client_uuid,
              conspectusUuid,
              content,
              now(),
            )
            if (!updated) throw appError('CONSPECTUS_NOT_FOUND')
            return { status: 200, body: updated, learner: owner.client_uuid }
          }),
      })
    },

    /**
     * POST /api/v1/conspectuses/{conspectus_uuid}/actions/review: `decide` moves the note as read;
     * the move, its review-log entry and the answer's record are one statement, made if the note
     * is still as read (else read and decided again).
     */
    review(
      request: IdempotentRequest,
      owner: UserKey,
      conspectusUuid: string,
      decide: (note: ReviewedNote) => ReviewDecision,
    ): Promise<Answer> {
      return answerIdempotently(db, request, {
        read: reviewedNoteQuery(db.sql, owner, conspectusUuid),
        take: takeReviewedNote,
        store: (note: ReviewedNote) => {
          const { at, move, facts } = decide(note)
          const atText = at.toISOString()
          const reviewed: Conspectus = {
            ...note.row,
            slot: move.slot,
            next_review_at: move.next_review_at,
            last_reviewed_at: atText,
            review_count: note.row.review_count + 1,
            updated_at: atText,
            memory: move.memory,
          }
          const ids = { user_id: note.owner.client_uuid, conspectus_uuid: note.row.conspectus_uuid }
          const before: ReviewMove = {
            slot: note.row.slot,
            next_review_at: isoText(note.row.next_review_at),
            memory: note.row.memory,
          }
          return inOneStatement(db, request, {
            status: 200,
            body: reviewed,
            learner: note.owner.client_uuid,
            statement: reviewStatement(db.sql, { ...ids, version: note.version }, move, atText),
            alongside: reviewLogStatement(db.sql, { ...ids, before }, move, facts, atText),
          })
        },
      })
    },
  }
}

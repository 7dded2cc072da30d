// createConspectus, listDueConspectuses, patchConspectus, reviewConspectus, getScheduleSummary,
// getConspectus, listConspectuses, deleteConspectus.
import { appError } from '../src/errors.js'
import { decodeCursor, encodeCursor } from '../src/pagination/cursor.js'
import {
  type Conspectus,
  type ConspectusContent,
  type ReviewedNoteRow,
  reviewedNoteQuery,
  reviewLogStatement,
  reviewStatement,
} from '../src/repositories/conspectuses.js'
import type { Owner } from '../src/repositories/users.js'
import { decideReview, newNoteSchedule, type ReviewMove } from '../src/schedule/policy.js'
import { invalidQueryParameter } from '../src/validation/request-validation-error.js'
import { answerMissingParent, ownerRead, requireOwner } from './owner.js'
import type { HandlerDeps, ServiceHandlers } from './types.js'

type ConspectusOperations =
  | 'createConspectus'
  | 'listDueConspectuses'
  | 'patchConspectus'
  | 'reviewConspectus'
  | 'getScheduleSummary'
  | 'getConspectus'
  | 'listConspectuses'
  | 'deleteConspectus'

const CONTENT_FIELDS = ['title', 'cue_sheet', 'dense_paragraph', 'bullets'] as const

/** A note a review reads, with its owner and the version of its row. */
interface ReviewedNote {
  owner: Owner
  row: Conspectus
  version: string
}

/** The read of a review: 404 USER_404 without the owner, CONS_404 without the note. */
function takeReviewedNote(row: ReviewedNoteRow | undefined): ReviewedNote {
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

/** Times as the store is sent them: postgres.js reads a timestamptz as a Date, the types say string. */
const isoText = (at: string | Date) => (typeof at === 'string' ? at : at.toISOString())

export function createConspectusHandlers({
  db,
  answerIdempotently,
  now,
}: HandlerDeps): ServiceHandlers<ConspectusOperations> {
  return {
    async createConspectus(request, reply) {
      const body = request.body
      const policy = body.schedule_policy ?? 'leitner'
      return answerIdempotently(request, reply, ownerRead(db, body), async ({ repos }, owner) => {
        // Refused after the key's lookup, so that a key reused with another body is 409 first.
        if (policy === 'leitner' && body.desired_retention !== undefined)
          throw appError('CONSPECTUS_DESIRED_RETENTION_WITHOUT_FSRS')
        const at = now()
        const conspectus = await answerMissingParent(
          repos.conspectuses.create(owner.client_uuid, {
            title: body.title ?? null,
            cue_sheet: body.cue_sheet,
            dense_paragraph: body.dense_paragraph,
            bullets: body.bullets,
            ...newNoteSchedule(policy, body.desired_retention, at, owner.timezone),
            created_at: at,
          }),
        )
        return { status: 201, body: conspectus }
      })
    },

    async listDueConspectuses(request) {
      const { system_user_id, system_uuid, as_of, limit } = request.query
      const due = await db.repos.conspectuses.listDueOf(
        { system_user_id, system_uuid },
        as_of ? new Date(as_of) : now(),
        limit ?? 50,
      )
      if (!due) throw appError('USER_NOT_FOUND')
      return due
    },

    async patchConspectus(request, reply) {
      const { conspectus_uuid } = request.params
      const body = request.body
      const content: ConspectusContent = {}
      for (const field of CONTENT_FIELDS)
        if (body[field] !== undefined) (content as Record<string, unknown>)[field] = body[field]
      if (Object.keys(content).length === 0) throw appError('CONSPECTUS_PATCH_BODY_EMPTY')
      return answerIdempotently(request, reply, ownerRead(db, body), async ({ repos }, owner) => {
        const updated = await repos.conspectuses.updateContent(owner.client_uuid, conspectus_uuid, content, now())
        if (!updated) throw appError('CONSPECTUS_NOT_FOUND')
        return { status: 200, body: updated }
      })
    },

    // Decided from the note as read and written in one statement with its answer's record, if the
    // note is still as read (else read and decided again): src/idempotency/index.ts.
    async reviewConspectus(request, reply) {
      const { conspectus_uuid } = request.params
      const body = request.body
      return answerIdempotently(request, reply, {
        query: reviewedNoteQuery(db.sql, body, conspectus_uuid),
        take: takeReviewedNote,
        write: (note) => {
          const at = now()
          const { move, facts } = decideReview(note.row, body.outcome, at, note.owner.timezone)
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
          return {
            status: 200,
            body: reviewed,
            statement: reviewStatement(db.sql, { ...ids, version: note.version }, move, atText),
            alongside: reviewLogStatement(db.sql, { ...ids, before }, move, facts, atText),
          }
        },
      })
    },

    async getScheduleSummary(request) {
      const { system_user_id, system_uuid, as_of } = request.query
      const owner = await requireOwner(db.repos, { system_user_id, system_uuid })
      const asOf = as_of ? new Date(as_of) : now()
      const counts = await db.repos.conspectuses.scheduleCounts(owner.client_uuid, asOf)
      return { system_user_id, system_uuid, as_of: asOf.toISOString(), ...counts }
    },

    async getConspectus(request) {
      const { system_user_id, system_uuid } = request.query
      const owner = await requireOwner(db.repos, { system_user_id, system_uuid })
      const conspectus = await db.repos.conspectuses.find(owner.client_uuid, request.params.conspectus_uuid)
      if (!conspectus) throw appError('CONSPECTUS_NOT_FOUND')
      return conspectus
    },

    async listConspectuses(request) {
      const { system_user_id, system_uuid, slot, limit, cursor } = request.query
      const after = cursor === undefined ? undefined : decodeCursor(cursor)
      if (after === null) throw invalidQueryParameter('cursor', cursor, 'is not a cursor this service issued')
      const owner = await requireOwner(db.repos, { system_user_id, system_uuid })
      const page = await db.repos.conspectuses.page(owner.client_uuid, { slot, after, limit: limit ?? 20 })
      return { items: page.items, next_cursor: page.next ? encodeCursor(page.next) : null }
    },

    // No Idempotency-Key: deleting twice has the effect of deleting once, and a stored answer
    // would outlive the note. The second DELETE answers 404 CONS_404 (already gone).
    async deleteConspectus(request) {
      const { system_user_id, system_uuid } = request.query
      const { conspectus_uuid } = request.params
      const owner = await requireOwner(db.repos, { system_user_id, system_uuid })
      const result = await db.repos.conspectuses.delete(owner.client_uuid, conspectus_uuid)
      if (!result.deleted) throw appError('CONSPECTUS_NOT_FOUND')
      return {
        conspectus_uuid: conspectus_uuid.toLowerCase(),
        deleted: true,
        unlinked_error_logs: result.unlinked_error_logs,
      }
    },
  }
}

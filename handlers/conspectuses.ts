// createConspectus, listDueConspectuses, patchConspectus, reviewConspectus, getScheduleSummary,
// getConspectus, listConspectuses, deleteConspectus.
import { appError } from '../src/errors.js'
import { sendAnswer } from '../src/http/send-answer.js'
import { idempotentRequest } from '../src/idempotency/request.js'
import { decodeCursor, encodeCursor } from '../src/pagination/cursor.js'
import type { ConspectusContent } from '../src/repositories/conspectuses.js'
import { decideReview, newNoteSchedule } from '../src/schedule/policy.js'
import { invalidQueryParameter } from '../src/validation/request-validation-error.js'
import { requireOwner } from './owner.js'
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

export function createConspectusHandlers({ db, writes, now }: HandlerDeps): ServiceHandlers<ConspectusOperations> {
  return {
    // src/repositories/conspectuses.ts: the note and its answer's record in one transaction.
    async createConspectus(request, reply) {
      const body = request.body
      const policy = body.schedule_policy ?? 'leitner'
      const answer = await writes.conspectuses.create(idempotentRequest(request, reply), body, (owner) => {
        // Refused after the key's lookup, so that a key reused with another body is 409 first.
        if (policy === 'leitner' && body.desired_retention !== undefined)
          throw appError('CONSPECTUS_DESIRED_RETENTION_WITHOUT_FSRS')
        const at = now()
        return {
          title: body.title ?? null,
          cue_sheet: body.cue_sheet,
          dense_paragraph: body.dense_paragraph,
          bullets: body.bullets,
          ...newNoteSchedule(policy, body.desired_retention, at, owner.timezone),
          created_at: at,
        }
      })
      return sendAnswer(reply, answer)
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
      const key = idempotentRequest(request, reply)
      return sendAnswer(reply, await writes.conspectuses.changeContent(key, body, conspectus_uuid, content, now))
    },

    // src/repositories/conspectuses.ts: decided from the note as read, and written in one
    // statement with its answer's record if the note is still as read (else read and decided again).
    async reviewConspectus(request, reply) {
      const body = request.body
      const answer = await writes.conspectuses.review(
        idempotentRequest(request, reply),
        body,
        request.params.conspectus_uuid,
        (note) => {
          const at = now()
          return { at, ...decideReview(note.row, body.outcome, at, note.owner.timezone) }
        },
      )
      return sendAnswer(reply, answer)
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

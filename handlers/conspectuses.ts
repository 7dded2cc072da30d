// createConspectus, listDueConspectuses, patchConspectus, reviewConspectus, getScheduleSummary,
// getConspectus, listConspectuses, deleteConspectus.
import { appError } from '../src/errors.js'
import { decodeCursor, encodeCursor } from '../src/pagination/cursor.js'
import type { ConspectusContent } from '../src/repositories/conspectuses.js'
import { FIRST_SLOT, nextReviewAt, reviewMoves } from '../src/schedule/leitner.js'
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

export function createConspectusHandlers({
  db,
  answerIdempotently,
  now,
}: HandlerDeps): ServiceHandlers<ConspectusOperations> {
  return {
    async createConspectus(request, reply) {
      const body = request.body
      return answerIdempotently(request, reply, ownerRead(db, body), async ({ repos }, owner) => {
        const at = now()
        const conspectus = await answerMissingParent(
          repos.conspectuses.create(owner.client_uuid, {
            title: body.title ?? null,
            cue_sheet: body.cue_sheet,
            dense_paragraph: body.dense_paragraph,
            bullets: body.bullets,
            slot: FIRST_SLOT,
            next_review_at: nextReviewAt(at, FIRST_SLOT, owner.timezone),
            created_at: at,
          }),
        )
        return { status: 201, body: conspectus }
      })
    },

    async listDueConspectuses(request) {
      const { system_user_id, system_uuid, as_of, limit } = request.query
      const owner = await requireOwner(db.repos, { system_user_id, system_uuid })
      return db.repos.conspectuses.listDue(owner.client_uuid, as_of ? new Date(as_of) : now(), limit ?? 50)
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

    async reviewConspectus(request, reply) {
      const { conspectus_uuid } = request.params
      const body = request.body
      return answerIdempotently(request, reply, ownerRead(db, body), async ({ repos }, owner) => {
        const at = now()
        const reviewed = await repos.conspectuses.recordReview(
          owner.client_uuid,
          conspectus_uuid,
          reviewMoves(body.outcome, at, owner.timezone),
          at,
        )
        if (!reviewed) throw appError('CONSPECTUS_NOT_FOUND')
        return { status: 200, body: reviewed }
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

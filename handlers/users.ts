// createUser, getUserBySystemUserId, updateUserBySystemUserId, patchUserBySystemUserId.
import { appError } from '../src/errors.js'
import { sendAnswer } from '../src/http/send-answer.js'
import { idempotentRequest } from '../src/idempotency/request.js'
import type { UserChanges } from '../src/repositories/users.js'
import type { HandlerDeps, RequestBody, ServiceHandlers } from './types.js'

type UserOperations = 'createUser' | 'getUserBySystemUserId' | 'updateUserBySystemUserId' | 'patchUserBySystemUserId'

/** PUT replaces every mutable field; an omitted system_uuid is kept. */
export function replacementChanges(body: RequestBody<'updateUserBySystemUserId'>): UserChanges {
  const changes: UserChanges = {
    full_name: body.full_name,
    timezone: body.timezone,
    username: body.username ?? null,
    is_row_invalid: body.is_row_invalid ?? 0,
    invalidation_reason_uuid: body.invalidation_reason_uuid ?? null,
  }
  if (body.system_uuid !== undefined) changes.system_uuid = body.system_uuid
  return changes
}

/** PATCH applies present fields; null clears nullable ones and counts as absent elsewhere. */
export function patchChanges(body: RequestBody<'patchUserBySystemUserId'>): UserChanges {
  const changes: UserChanges = {}
  if (body.full_name != null) changes.full_name = body.full_name
  if (body.timezone != null) changes.timezone = body.timezone
  if (body.is_row_invalid != null) changes.is_row_invalid = body.is_row_invalid
  if (body.username !== undefined) changes.username = body.username
  if (body.invalidation_reason_uuid !== undefined) changes.invalidation_reason_uuid = body.invalidation_reason_uuid
  if (body.system_uuid !== undefined) changes.system_uuid = body.system_uuid
  return changes
}

export function createUserHandlers({ db, writes, now }: HandlerDeps): ServiceHandlers<UserOperations> {
  return {
    // src/repositories/users.ts: the insert and its answer's record in one statement.
    async createUser(request, reply) {
      const answer = await writes.users.create(idempotentRequest(request, reply), request.body, now)
      return sendAnswer(reply, answer)
    },

    async getUserBySystemUserId(request) {
      const user = await db.repos.users.findByKey(request.params)
      if (!user) throw appError('USER_NOT_FOUND')
      return user
    },

    // src/repositories/users.ts: decided from the row as read, and written in one statement with
    // its answer's record if the row is still as read (else read and decided again).
    async updateUserBySystemUserId(request, reply) {
      const changes = replacementChanges(request.body)
      const answer = await writes.users.change(idempotentRequest(request, reply), request.params, changes, now)
      return sendAnswer(reply, answer)
    },

    async patchUserBySystemUserId(request, reply) {
      const changes = patchChanges(request.body)
      if (Object.keys(changes).length === 0) throw appError('USER_PATCH_BODY_EMPTY')
      const answer = await writes.users.change(idempotentRequest(request, reply), request.params, changes, now)
      return sendAnswer(reply, answer)
    },
  }
}

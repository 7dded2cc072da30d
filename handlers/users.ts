// createUser, getUserBySystemUserId, updateUserBySystemUserId, patchUserBySystemUserId.
import { appError } from '../src/errors.js'
import { UserKeyConflict, type UserChanges, type UserKey } from '../src/repositories/users.js'
import type { Repositories } from '../src/repositories/index.js'
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

async function applyChanges(repos: Repositories, key: UserKey, changes: UserChanges) {
  try {
    const user = await repos.users.update(key, changes)
    if (!user) throw appError('USER_NOT_FOUND')
    return { status: 200 as const, body: user }
  } catch (err) {
    if (err instanceof UserKeyConflict) throw appError('USER_SYSTEM_KEY_CONFLICT')
    throw err
  }
}

export function createUserHandlers({ db, answerIdempotently }: HandlerDeps): ServiceHandlers<UserOperations> {
  return {
    async createUser(request, reply) {
      const body = request.body
      return answerIdempotently(request, reply, async ({ repos }) => {
        const user = await repos.users.create({
          system_user_id: body.system_user_id,
          system_uuid: body.system_uuid,
          full_name: body.full_name,
          username: body.username ?? null,
          timezone: body.timezone ?? 'UTC',
          is_row_invalid: body.is_row_invalid ?? 0,
          invalidation_reason_uuid: body.invalidation_reason_uuid ?? null,
        })
        if (!user) throw appError('USER_CREATE_ALREADY_EXISTS')
        return { status: 201, body: user }
      })
    },

    async getUserBySystemUserId(request) {
      const user = await db.repos.users.findByKey(request.params)
      if (!user) throw appError('USER_NOT_FOUND')
      return user
    },

    async updateUserBySystemUserId(request, reply) {
      const key = request.params
      const changes = replacementChanges(request.body)
      return answerIdempotently(request, reply, ({ repos }) => applyChanges(repos, key, changes))
    },

    async patchUserBySystemUserId(request, reply) {
      const key = request.params
      const changes = patchChanges(request.body)
      if (Object.keys(changes).length === 0) throw appError('USER_PATCH_BODY_EMPTY')
      return answerIdempotently(request, reply, ({ repos }) => applyChanges(repos, key, changes))
    },
  }
}

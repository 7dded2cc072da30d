// createUser, getUserBySystemUserId, updateUserBySystemUserId, patchUserBySystemUserId.
import { appError } from '../src/errors.js'
import { randomUUID } from 'node:crypto'
import type { ReadThenWrite } from '../src/idempotency/index.js'
import {
  asKeyConflict,
  asStored,
  type User,
  UserKeyConflict,
  type UserChanges,
  type UserKey,
  userInsertStatement,
  userUpdateStatement,
  type VersionedUser,
  versionedUserQuery,
} from '../src/repositories/users.js'
import type { HandlerDatabase, HandlerDeps, RequestBody, ServiceHandlers } from './types.js'

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

/**
 * A learner's changes, decided from its row as read and written in one statement with the answer's
 * record if the row is still as read (else read and decided again): src/idempotency/index.ts.
 */
function changesWrite(
  sql: HandlerDatabase['sql'],
  key: UserKey,
  changes: UserChanges,
  now: () => Date,
): ReadThenWrite<VersionedUser, VersionedUser, User> {
  return {
    query: versionedUserQuery(sql, key),
    take: (row) => {
      if (!row) throw appError('USER_NOT_FOUND')
      return row
    },
    write: ({ version, ...user }) => {
      const at = now().toISOString()
      return {
        status: 200,
        body: { ...user, ...asStored(changes), updated_at: at } as User,
        learner: user.client_uuid,
        statement: userUpdateStatement(sql, { client_uuid: user.client_uuid, version }, changes, at),
      }
    },
    failed: (err) => (asKeyConflict(err) instanceof UserKeyConflict ? appError('USER_SYSTEM_KEY_CONFLICT') : err),
  }
}

export function createUserHandlers({ db, answerIdempotently, now }: HandlerDeps): ServiceHandlers<UserOperations> {
  return {
    // Inserted with the answer's record in one statement, unless the system key is taken (the
    // insert writes nothing: 400, or a twin's answer replayed). Reads nothing first: its lookup is
    // the record's alone, as a replay's.
    async createUser(request, reply) {
      const body = request.body
      return answerIdempotently(request, reply, {
        unwritten: () => appError('USER_CREATE_ALREADY_EXISTS'),
        write: () => {
          const at = now().toISOString()
          const user = asStored<User>({
            client_uuid: randomUUID(),
            created_at: at,
            updated_at: at,
            is_row_invalid: body.is_row_invalid ?? 0,
            invalidation_reason_uuid: body.invalidation_reason_uuid ?? null,
            system_user_id: body.system_user_id,
            system_uuid: body.system_uuid,
            username: body.username ?? null,
            full_name: body.full_name,
            timezone: body.timezone ?? 'UTC',
          })
          return {
            status: 201 as const,
            body: user,
            learner: user.client_uuid,
            statement: userInsertStatement(db.sql, user),
          }
        },
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
      return answerIdempotently(request, reply, changesWrite(db.sql, key, changes, now))
    },

    async patchUserBySystemUserId(request, reply) {
      const key = request.params
      const changes = patchChanges(request.body)
      if (Object.keys(changes).length === 0) throw appError('USER_PATCH_BODY_EMPTY')
      return answerIdempotently(request, reply, changesWrite(db.sql, key, changes, now))
    },
  }
}

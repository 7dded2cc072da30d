// SQL for learners (table users). Every function returns rows in the UserResponse shape; the
// idempotent writes (POST, PUT and PATCH of a learner) answer with one.
import { randomUUID } from 'node:crypto'
import type { Db } from '../db/client.js'
import type { components } from '../../generated/api.js'
import { appError } from '../errors.js'
import {
  type Answer,
  type AnswerStore,
  answerIdempotently,
  type IdempotentRequest,
  inOneStatement,
} from '../idempotency/index.js'
import { rowVersion } from './row-version.js'

export type User = components['schemas']['UserResponse']
export type NewUserRequest = components['schemas']['UserCreateRequest']
export interface UserKey {
  system_uuid: string
  system_user_id: string
}
/** What a write on a learner's behalf needs of the learner: its row id and its time zone. */
export interface Owner {
  client_uuid: string
  timezone: string
}
export interface NewUser {
  system_user_id: string
  system_uuid: string
  full_name: string
  username: string | null
  timezone: string
  is_row_invalid: number
  invalidation_reason_uuid: string | null
}
/** Column -> new value; only the listed columns change. */
export type UserChanges = Partial<Omit<NewUser, 'system_user_id' | 'system_uuid'> & { system_uuid: string | null }>

/** Thrown when a change would give a user another user's natural key. */
export class UserKeyConflict extends Error {}

/** A statement's failure as UserKeyConflict when it broke the natural key, else the failure itself. */
export function asKeyConflict(err: unknown): unknown {
  const { code, constraint_name } = err as { code?: string; constraint_name?: string }
  return code === '23505' && constraint_name === 'users_system_key' ? new UserKeyConflict('natural key taken') : err
}

export function rethrowKeyConflict(err: unknown): never {
  throw asKeyConflict(err)
}

/** The UserResponse columns of table users, in SQL. */
export const USER_COLUMN_LIST = `client_uuid, created_at, updated_at, is_row_invalid, invalidation_reason_uuid,
    system_user_id, system_uuid, username, full_name, timezone`

/** The owner's row, or 404 USER_404: the one rule of a read of the owner and of a write's. */
export function takeOwner(row: Owner | undefined): Owner {
  if (!row) throw appError('USER_NOT_FOUND')
  return { client_uuid: row.client_uuid, timezone: row.timezone }
}

/**
 * The owner's row (client_uuid and timezone) by the learner's system key, as a statement built
 * but not sent: findOwner() runs it, and an idempotent write sends it inside its answer lookup.
 */
export function ownerQuery(db: Db, key: UserKey) {
  return db<Owner[]>`
    select client_uuid, timezone from users
    where system_uuid = ${key.system_uuid} and system_user_id = ${key.system_user_id}`
}

/** A learner's row as an update reads it, with its version (./row-version.ts). */
export type VersionedUser = User & { version: string }

const VERSIONED_USER_COLUMNS = `${USER_COLUMN_LIST}, ${rowVersion('users')} as version`
const USER_VERSION = rowVersion('users')

/** The learner by its system key, with the version of its row: a statement built but not sent. */
export function versionedUserQuery(db: Db, key: UserKey) {
  return db<VersionedUser[]>`
    select ${db.unsafe(VERSIONED_USER_COLUMNS)}
    from users where system_uuid = ${key.system_uuid} and system_user_id = ${key.system_user_id}`
}

/**
 * The changes to a learner's row, built but not sent: made if the row is still the version read
 * (one row returned), else nothing (none). Its failure goes through asKeyConflict.
 */
export function userUpdateStatement(
  db: Db,
  user: { client_uuid: string; version: string },
  changes: UserChanges,
  at: string,
) {
  const columns = Object.keys(changes) as (keyof UserChanges)[]
  return db`
    update users set ${db(changes, columns)}, updated_at = ${at}::text::timestamptz
    where client_uuid = ${user.client_uuid} and ${db.unsafe(USER_VERSION)} = ${user.version}
    returning 1`
}

/**
 * A new learner's row, every column given (its id and times made by the service), built but not
 * sent: inserted unless its system key is taken by then (one row returned, else none).
 */
export function userInsertStatement(db: Db, user: User) {
  return db`
    insert into users (client_uuid, system_user_id, system_uuid, full_name, username, timezone, is_row_invalid,
                       invalidation_reason_uuid, created_at, updated_at)
    values (${user.client_uuid}, ${user.system_user_id}, ${user.system_uuid}, ${user.full_name}, ${user.username},
            ${user.timezone}, ${user.is_row_invalid}, ${user.invalidation_reason_uuid},
            ${user.created_at}::text::timestamptz, ${user.updated_at}::text::timestamptz)
    on conflict on constraint users_system_key do nothing
    returning 1`
}

/**
 * A learner's columns as PostgreSQL stores them and answers them: a uuid in lower case (the
 * contract accepts either case). For a new learner's row and for changes to one.
 */
export function asStored<T extends Pick<UserChanges, 'system_uuid' | 'invalidation_reason_uuid'>>(columns: T): T {
  const stored = { ...columns }
  if (typeof stored.system_uuid === 'string') stored.system_uuid = stored.system_uuid.toLowerCase()
  if (typeof stored.invalidation_reason_uuid === 'string')
    stored.invalidation_reason_uuid = stored.invalidation_reason_uuid.toLowerCase()
  return stored
}

export function createUserRepository(db: Db) {
  return {
    // The reads' column lists are written out (USER_COLUMN_LIST's): a query with a fragment is
    // rebuilt and looked up by its whole text on every call, a static one is cached by its template.
    async findByKey(key: UserKey): Promise<User | undefined> {
      const [row] = await db<User[]>`
        select client_uuid, created_at, updated_at, is_row_invalid, invalidation_reason_uuid,
               system_user_id, system_uuid, username, full_name, timezone
        from users where system_uuid = ${key.system_uuid} and system_user_id = ${key.system_user_id}`
      return row
    },

    /** A learner by its identity (client_uuid): also one whose system_uuid was cleared. */
    async findById(clientUuid: string): Promise<User | undefined> {
      const [row] = await db<User[]>`
        select client_uuid, created_at, updated_at, is_row_invalid, invalidation_reason_uuid,
               system_user_id, system_uuid, username, full_name, timezone
        from users where client_uuid = ${clientUuid}`
      return row
    },

    /** The owner of notes and error logs, by the learner's system key. */
    async findOwner(key: UserKey): Promise<Owner | undefined> {
      const [row] = await ownerQuery(db, key)
      return row
    },
  }
}

export type UserRepository = ReturnType<typeof createUserRepository>

/** A statement's failure as 400 USER_SYSTEM_KEY_CONFLICT when it broke the natural key, else as it is. */
function answerKeyConflict(err: unknown): never {
  throw asKeyConflict(err) instanceof UserKeyConflict ? appError('USER_SYSTEM_KEY_CONFLICT') : err
}

/** The row an update reads, or 404 USER_404. */
function takeVersionedUser(row: VersionedUser | undefined): VersionedUser {
  if (!row) throw appError('USER_NOT_FOUND')
  return row
}

/** The idempotent writes of learners: each in one statement with its answer's record (src/idempotency/). */
export function createUserWrites(db: AnswerStore) {
  return {
    /**
     * POST /api/v1/user: the learner inserted with its answer's record in one statement, unless
     * its system key is taken (the insert writes nothing: 400, or a twin's answer replayed).
     * Reads nothing first: its lookup is the record's alone, as a replay's.
     */
    create(request: IdempotentRequest, body: NewUserRequest, now: () => Date): Promise<Answer> {
      return answerIdempotently(db, request, {
        async store() {
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
          const statement = userInsertStatement(db.sql, user)
          const answer = await inOneStatement(db, request, {
            status: 201,
            body: user,
            learner: user.client_uuid,
            statement,
          })
          if (!answer) throw appError('USER_CREATE_ALREADY_EXISTS')
          return answer
        },
      })
    },

    /**
     * PUT and PATCH /api/v1/user/{system_uuid}/{system_user_id}: the learner's changes, decided from
     * its row as read and written in one statement with the answer's record if the row is still as
     * read (else read and decided again). The answer is the row as PostgreSQL stores it.
     */
    change(request: IdempotentRequest, key: UserKey, changes: UserChanges, now: () => Date): Promise<Answer> {
      return answerIdempotently(db, request, {
        read: versionedUserQuery(db.sql, key),
        take: takeVersionedUser,
        store: ({ version, ...user }: VersionedUser) => {
          const at = now().toISOString()
          const statement = userUpdateStatement(db.sql, { client_uuid: user.client_uuid, version }, changes, at)
          const body = { ...user, ...asStored(changes), updated_at: at } as User
          return inOneStatement(db, request, { status: 200, body, learner: user.client_uuid, statement }).catch(
            answerKeyConflict,
          )
        },
      })
    },
  }
}

// Resolves the owner key of a request to what a handler needs of the owner, or answers 404 USER_404.
import { appError } from '../src/errors.js'
import type { Read } from '../src/idempotency/index.js'
import { MissingParent } from '../src/repositories/error-logs.js'
import type { Repositories } from '../src/repositories/index.js'
import { type Owner, ownerQuery, type UserKey } from '../src/repositories/users.js'
import type { HandlerDatabase } from './types.js'

/** The owner's row, or 404 USER_404: the one rule of both reads below. */
function takeOwner(row: Owner | undefined): Owner {
  if (!row) throw appError('USER_NOT_FOUND')
  return { client_uuid: row.client_uuid, timezone: row.timezone }
}

export async function requireOwner(repos: Repositories, key: UserKey): Promise<Owner> {
  return takeOwner(await repos.users.findOwner({ system_uuid: key.system_uuid, system_user_id: key.system_user_id }))
}

/** The same as the read of an idempotent write: sent in one statement with its answer lookup. */
export function ownerRead(db: HandlerDatabase, key: UserKey): Read<Owner, Owner> {
  return {
    query: ownerQuery(db.sql, { system_uuid: key.system_uuid, system_user_id: key.system_user_id }),
    take: takeOwner,
  }
}

/**
 * The insert's result, or 404 when a row it names went in the meantime: the owner erased after
 * the write read it (USER_404), or the linked conspectus deleted after it was checked (CONS_404).
 */
export async function answerMissingParent<T>(insert: Promise<T>): Promise<T> {
  try {
    return await insert
  } catch (err) {
    if (err instanceof MissingParent) throw appError(err.parent === 'user' ? 'USER_NOT_FOUND' : 'CONSPECTUS_NOT_FOUND')
    throw err
  }
}

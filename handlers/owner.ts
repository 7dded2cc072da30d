// Resolves the owner key of a request to what a handler needs of the owner, or answers 404 USER_404.
import { appError } from '../src/errors.js'
import type { Repositories } from '../src/repositories/index.js'
import type { Owner, UserKey } from '../src/repositories/users.js'

export async function requireOwner(repos: Repositories, key: UserKey): Promise<Owner> {
  const owner = await repos.users.findOwner({ system_uuid: key.system_uuid, system_user_id: key.system_user_id })
  if (!owner) throw appError('USER_NOT_FOUND')
  return owner
}

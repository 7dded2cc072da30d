// Resolves the owner key of a request to the stored user, or answers 404 USER_404.
import { appError } from '../src/errors.js'
import type { Repositories } from '../src/repositories/index.js'
import type { User, UserKey } from '../src/repositories/users.js'

export async function requireOwner(repos: Repositories, key: UserKey): Promise<User> {
  const user = await repos.users.findByKey({ system_uuid: key.system_uuid, system_user_id: key.system_user_id })
  if (!user) throw appError('USER_NOT_FOUND')
  return user
}

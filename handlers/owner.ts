// Resolves the owner key of a request to what a handler needs of the owner, or answers 404 USER_404.
import type { Repositories } from '../src/repositories/index.js'
import { type Owner, takeOwner, type UserKey } from '../src/repositories/users.js'

export async function requireOwner(repos: Repositories, key: UserKey): Promise<Owner> {
  return takeOwner(await repos.users.findOwner({ system_uuid: key.system_uuid, system_user_id: key.system_user_id }))
}

// An insert that names a row gone in the meantime: the owner (erased after the write read it) or
// the linked conspectus (deleted after the write checked it). The write answers 404.
import { appError, type ErrorKey } from '../errors.js'

const ANSWER_OF_CONSTRAINT: Record<string, ErrorKey> = {
  conspectuses_user_id_fkey: 'USER_NOT_FOUND',
  error_logs_user_id_fkey: 'USER_NOT_FOUND',
  error_logs_conspectus_uuid_fkey: 'CONSPECTUS_NOT_FOUND',
}

/** An insert's foreign-key violation as its 404 (USER_404 or CONS_404); anything else rethrown. */
export function answerMissingParent(err: unknown): never {
  const answer = ANSWER_OF_CONSTRAINT[(err as { constraint_name?: string }).constraint_name ?? '']
  if ((err as { code?: string }).code === '23503' && answer) throw appError(answer)
  throw err
}

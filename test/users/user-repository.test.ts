// The user repository on its own: the owner lookup, and which database errors of an update (the
// statement PUT and PATCH send) become the natural-key conflict (USER_409 at the handler) and
// which are passed on as they are.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import {
  createUserRepository,
  type NewUser,
  rethrowKeyConflict,
  type User,
  type UserChanges,
  type UserKey,
  UserKeyConflict,
  userInsertStatement,
  userUpdateStatement,
  versionedUserQuery,
} from '../../src/repositories/users.js'
import { createTestDatabase } from '../helpers/database.js'

const db = await createTestDatabase(t)
const users = createUserRepository(db.sql)
const newUser = (extra: Partial<NewUser> = {}): NewUser => ({
  system_user_id: `u-${randomUUID().slice(0, 8)}`,
  system_uuid: randomUUID(),
  full_name: `Repo User ${randomUUID().slice(0, 8)}`,
  username: null,
  timezone: 'Europe/Paris',
  is_row_invalid: 0,
  invalidation_reason_uuid: null,
  ...extra,
})

/** A learner inserted as POST makes it (its id and times made here); undefined when its system key is taken. */
async function create(user: NewUser): Promise<User | undefined> {
  const at = new Date().toISOString()
  const row = { ...user, client_uuid: randomUUID(), created_at: at, updated_at: at } as User
  return (await userInsertStatement(db.sql, row)).count === 1 ? row : undefined
}

/** The update as PUT and PATCH make it: the row read with its version, then the statement. */
async function update(key: UserKey, changes: UserChanges): Promise<number> {
  const [row] = await versionedUserQuery(db.sql, key)
  try {
    return (await userUpdateStatement(db.sql, row!, changes, new Date().toISOString())).count
  } catch (err) {
    rethrowKeyConflict(err)
  }
}

const keyOf = (u: { system_user_id: string; system_uuid: string | null }) => ({
  system_user_id: u.system_user_id,
  system_uuid: u.system_uuid!,
})

t.test("findOwner: the learner's client_uuid and time zone, or undefined", async (t) => {
  const user = (await create(newUser()))!
  t.same(await users.findOwner(keyOf(user)), { client_uuid: user.client_uuid, timezone: 'Europe/Paris' })
  t.equal(await users.findOwner({ system_user_id: user.system_user_id, system_uuid: randomUUID() }), undefined)
})

t.test("an update onto another user's natural key is a UserKeyConflict", async (t) => {
  const a = (await create(newUser()))!
  const b = (await create(newUser({ system_user_id: a.system_user_id })))!
  const conflict = await update(keyOf(b), { system_uuid: a.system_uuid }).catch((err) => err)
  t.ok(conflict instanceof UserKeyConflict, String(conflict))
})

t.test('any other database error of an update is passed on unchanged', async (t) => {
  const a = (await create(newUser()))!
  // An unknown column: not a unique violation at all.
  const unknown = await update(keyOf(a), { no_such_column: 1 } as never).catch((err) => err)
  t.notOk(unknown instanceof UserKeyConflict)
  t.equal(unknown.code, '42703')
  // A unique violation of another constraint (one made for this test): not the natural key.
  await db.sql`create unique index users_full_name_test on users (full_name)`
  t.teardown(() => db.sql`drop index users_full_name_test`)
  const b = (await create(newUser({ full_name: 'Someone Else' })))!
  const other = await update(keyOf(b), { full_name: a.full_name }).catch((err) => err)
  t.notOk(other instanceof UserKeyConflict)
  t.match(other, { code: '23505', constraint_name: 'users_full_name_test' })
})

t.test('an update of a row changed since it was read writes nothing', async (t) => {
  const a = (await create(newUser()))!
  const [read] = await versionedUserQuery(db.sql, keyOf(a))
  await db.sql`update users set username = 'meanwhile' where client_uuid = ${a.client_uuid}`
  const stale = await userUpdateStatement(db.sql, read!, { full_name: 'From A Stale Read' }, new Date().toISOString())
  t.equal(stale.count, 0)
  const [now] = await versionedUserQuery(db.sql, keyOf(a))
  t.same([now!.full_name, now!.username], [a.full_name, 'meanwhile'], 'the row as the other write left it')
  t.not(now!.version, read!.version)
  const fresh = await userUpdateStatement(db.sql, now!, { full_name: 'From A Fresh Read' }, new Date().toISOString())
  t.equal(fresh.count, 1)
})

t.test('an insert onto a taken system key writes nothing', async (t) => {
  const a = (await create(newUser()))!
  t.equal(await create(newUser({ system_user_id: a.system_user_id, system_uuid: a.system_uuid! })), undefined)
  t.equal((await users.findByKey(keyOf(a)))?.full_name, a.full_name, 'the first one kept')
})

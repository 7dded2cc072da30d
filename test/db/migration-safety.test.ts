// Migrations are safe while the previous version serves (docs/migrations.md): no ACCESS
// EXCLUSIVE lock on a table with rows and no NOT NULL column without a default, unless the
// statement says why; and a migration that meets a held lock waits briefly and is tried again.
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import postgres from 'postgres'
import { ADMIN_URL, databaseUrl } from '../helpers/database.js'
import { waitFor } from '../helpers/wait.js'
import { checkMigrations, notNullWithoutDefault, splitStatements } from '../helpers/migration-safety.js'
import { createClient } from '../../src/db/client.js'
import { migrate } from '../../src/db/migrate.js'
import { migrationsDir } from '../../src/paths.js'

t.setTimeout(240_000)

/** A fresh, empty database, dropped at the end. */
async function freshDatabase(t: Test): Promise<string> {
  const name = `study_mig_${process.pid}_${randomBytes(4).toString('hex')}`
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
  await admin.unsafe(`create database "${name}"`)
  t.teardown(async () => {
    await admin.unsafe(`drop database if exists "${name}" with (force)`)
    await admin.end()
  })
  return databaseUrl(name)
}

async function tempMigrations(t: Test, files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'migrations-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, name), text)
  return dir
}

t.test('the statement splitter keeps function bodies whole and finds markers directly above', async (t) => {
  const statements = splitStatements(`-- a table
create table a (x int);

-- why this is fine, in words
-- migration-safety: access-exclusive: a TTL's worth of rows, rebuilt in milliseconds
alter table a add column y int;
-- migration-safety: not-null-without-default: not directly above

create function f() returns int language sql as $$ select 1; select 2 $$;
insert into a values (';')`)
  t.same(
    statements.map((s) => s.text.split(' ').slice(0, 2).join(' ')),
    ['create table', 'alter table', 'create function', 'insert into'],
  )
  t.same(statements[1]!.markers, { 'access-exclusive': "a TTL's worth of rows, rebuilt in milliseconds" })
  t.same(statements[2]!.markers, {}, 'a blank line ends the run of comments above a statement')
  t.equal(statements[1]!.line, 6)
  t.same(
    notNullWithoutDefault('alter table a add column b text not null, add column c int not null default 0, add d int'),
    ['b'],
  )
  t.same(notNullWithoutDefault('alter table a add constraint a_pkey primary key (x)'), [])
  t.same(notNullWithoutDefault('create table b (x int not null)'), [], 'a new table is empty')
})

t.test('every migration in db/migrations follows the rules on tables that hold rows', async (t) => {
  const { violations, applied } = await checkMigrations(await freshDatabase(t), migrationsDir)
  t.ok(applied.length >= 10, `applied ${applied.length} files one by one`)
  t.same(violations, [], 'no unmarked ACCESS EXCLUSIVE lock on a table with rows, no NOT NULL column without a default')
})

t.test('an unsafe migration is caught', async (t) => {
  const dir = await tempMigrations(t, {
    '0001_t.sql': 'create table t (id int primary key, note text);\n',
    '0002_bad.sql': [
      '-- a column added the old way: a lock on every row of t',
      'alter table t alter column note type varchar(10);',
      '',
    ].join('\n'),
    '0004_not_null.sql': 'create index t_note on t (note);\nalter table t add column owner text not null;\n',
    '0003_said_why.sql': [
      '-- migration-safety: access-exclusive: adding a nullable column rewrites nothing; the lock is brief',
      'alter table t add column later int;',
      'create index t_later on t (later);',
      '',
    ].join('\n'),
  })
  const { violations } = await checkMigrations(await freshDatabase(t), dir)
  t.same(
    violations.map((v) => `${v.file}:${v.line} ${v.rule}`),
    ['0002_bad.sql:2 access-exclusive', '0004_not_null.sql:2 not-null-without-default', '0004_not_null.sql:2 fails'],
    'the type change (ACCESS EXCLUSIVE on a table with rows) and the NOT NULL column (which fails on rows); the marked one passes',
  )
})

t.test('a migration that meets a held lock gives up quickly and is tried again', async (t) => {
  const url = await freshDatabase(t)
  const dir = await tempMigrations(t, {
    '0001_t.sql': 'create table t (id int primary key);\n',
    '0002_add.sql': 'alter table t add column note text;\n',
  })
  const sql = createClient(url, { max: 2 })
  t.teardown(() => sql.end())
  t.same(await migrate(sql, dir, { attempts: 1 }).then(() => migrate(sql, dir)), [], 'both applied')
  await sql`delete from schema_migrations where name = '0002_add.sql'`
  await sql`alter table t drop column note`

  // A long reader holds t: the ALTER would queue behind it, and every query on t behind the ALTER.
  const other = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(() => other.end())
  const reader = await other.reserve()
  await reader`begin`
  await reader`select * from t`
  // The reader holds t until it commits below: an answer now is lock_timeout's, not the reader's.
  const refused = await migrate(sql, dir, { lockTimeoutMs: 100, attempts: 1 }).catch((err) => err)
  t.equal(refused.code, '55P03', 'lock_timeout ends the wait, while the reader still holds the table')

  const retried = migrate(sql, dir, { lockTimeoutMs: 100, attempts: 10, retryPauseMs: 100 })
  const watcher = postgres(url, { max: 1, onnotice: () => {} })
  t.teardown(() => watcher.end())
  // The reader lets go once a retry has been seen queued for its lock.
  await waitFor('the migration to wait for its lock on t again', async () => {
    const waiting = await watcher`select 1 from pg_locks where relation = 't'::regclass and not granted`
    return waiting.length > 0
  })
  await reader`commit`
  reader.release()
  t.same(await retried, ['0002_add.sql'], 'tried again until the reader was gone')

  const slowDir = await tempMigrations(t, { '0003_slow.sql': 'select pg_sleep(2);\n' })
  const slow = await migrate(sql, slowDir, { statementTimeoutMs: 200 }).catch((err) => err)
  t.equal(slow.code, '57014', 'statement_timeout bounds a statement')
  t.same(
    (await sql`select name from schema_migrations where name = '0003_slow.sql'`).length,
    0,
    'and the file is not recorded',
  )
})

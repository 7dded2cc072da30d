// Each test file gets its own PostgreSQL database, migrated, and dropped at the end. Databases
// are cloned from a template migrated once per run (named by a hash of the migrations and the
// migrator), so no test file pays for migrating; `test/helpers/drop-template.ts` drops it after.
import { createHash, randomBytes } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import postgres from 'postgres'
import type { Test } from 'tap'
import { createClient, type Sql } from '../../src/db/client.js'
import { migrate } from '../../src/db/migrate.js'
import { migrationsDir, projectRoot } from '../../src/paths.js'

export const ADMIN_URL =
  process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres'

export function databaseUrl(name: string, base = ADMIN_URL): string {
  const url = new URL(base)
  url.pathname = `/${name}`
  return url.toString()
}

export interface TestDatabase {
  name: string
  url: string
  sql: Sql
}

/** The template's name: it changes whenever a migration or the migrator changes. */
export function templateName(): string {
  const hash = createHash('sha256')
  hash.update(readFileSync(path.join(projectRoot, 'src/db/migrate.ts')))
  for (const file of readdirSync(migrationsDir)
    .filter((f) => f.endsWith('.sql'))
    .sort()) {
    hash.update(file).update(readFileSync(path.join(migrationsDir, file)))
  }
  return `study_tpl_${hash.digest('hex').slice(0, 16)}`
}

const TEMPLATE_LOCK = 7_346_110_202 // serialises building the template across test processes

/** Builds the template under another name and renames it, so nobody clones a half-built one. */
async function ensureTemplate(admin: postgres.Sql, template: string): Promise<void> {
  await admin`select pg_advisory_lock(${TEMPLATE_LOCK})`
  try {
    const [exists] = await admin`select 1 from pg_database where datname = ${template}`
    if (exists) return
    const building = `${template}_build`
    await admin.unsafe(`drop database if exists "${building}" with (force)`)
    await admin.unsafe(`create database "${building}"`)
    const sql = createClient(databaseUrl(building), { max: 1 })
    try {
      await migrate(sql)
    } finally {
      await sql.end({ timeout: 5 })
    }
    await admin.unsafe(`alter database "${building}" rename to "${template}"`)
  } finally {
    await admin`select pg_advisory_unlock(${TEMPLATE_LOCK})`
  }
}

/** `migrated: false` leaves it empty (an upgrade test lets a previous release create the schema). */
export async function createTestDatabase(
  t: Test,
  options: { max?: number; migrated?: boolean } = {},
): Promise<TestDatabase> {
  const name = `study_test_${process.pid}_${randomBytes(4).toString('hex')}`
  const template = options.migrated === false ? 'template1' : templateName()
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
  // Another run with the same migrations may drop the template after its own last test: build
  // it again then.
  for (let attempt = 1; ; attempt++) {
    if (template !== 'template1') await ensureTemplate(admin, template)
    try {
      await admin.unsafe(`create database "${name}" template "${template}"`)
      break
    } catch (error) {
      if (attempt >= 3) throw error
    }
  }
  const url = databaseUrl(name)
  const sql = createClient(url, { max: options.max ?? 10 })
  t.teardown(async () => {
    await sql.end({ timeout: 5 })
    await admin.unsafe(`drop database if exists "${name}" with (force)`)
    await admin.end()
  })
  return { name, url, sql }
}

/**
 * A fresh database with only the migration files that `applied` selects, for tests of an upgrade
 * across the others (`migrate(db.sql)` applies them later).
 */
export async function createPartlyMigratedDatabase(t: Test, applied: (file: string) => boolean): Promise<TestDatabase> {
  const db = await createTestDatabase(t, { migrated: false })
  const dir = await mkdtemp(path.join(os.tmpdir(), 'migrations-'))
  try {
    for (const file of (await readdir(migrationsDir)).filter((f) => f.endsWith('.sql') && applied(f)))
      await copyFile(path.join(migrationsDir, file), path.join(dir, file))
    await migrate(db.sql, dir)
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
  return db
}

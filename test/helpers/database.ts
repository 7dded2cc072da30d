// Each test file gets its own PostgreSQL database, migrated, and dropped at the end.
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import type { Test } from 'tap'
import { createClient, type Sql } from '../../src/db/client.js'
import { migrate } from '../../src/db/migrate.js'

export const ADMIN_URL = process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres'

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

/** `migrated: false` leaves it empty (an upgrade test lets a previous release create the schema). */
export async function createTestDatabase(t: Test, options: { max?: number; migrated?: boolean } = {}): Promise<TestDatabase> {
  const name = `study_test_${process.pid}_${randomBytes(4).toString('hex')}`
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
  await admin.unsafe(`create database "${name}"`)
  const url = databaseUrl(name)
  const sql = createClient(url, { max: options.max ?? 10 })
  if (options.migrated !== false) await migrate(sql)
  t.teardown(async () => {
    await sql.end({ timeout: 5 })
    await admin.unsafe(`drop database if exists "${name}" with (force)`)
    await admin.end()
  })
  return { name, url, sql }
}

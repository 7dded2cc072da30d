// Applies db/migrations/*.sql in name order, each recorded in schema_migrations. The whole run
// holds a transaction-scoped advisory lock, so replicas starting together apply each file once.
import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import type { Sql } from './client.js'
import { migrationsDir } from '../paths.js'

const LOCK_ID = 7_346_110_201 // arbitrary constant shared by every replica

export async function migrate(sql: Sql, dir = migrationsDir): Promise<string[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort()
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${LOCK_ID})`
    await tx`create table if not exists schema_migrations (
      name text primary key,
      applied_at timestamptz not null default now()
    )`
    const done = new Set((await tx<{ name: string }[]>`select name from schema_migrations`).map((r) => r.name))
    const applied: string[] = []
    for (const file of files) {
      if (done.has(file)) continue
      await tx.unsafe(await readFile(path.join(dir, file), 'utf8'))
      await tx`insert into schema_migrations (name) values (${file})`
      applied.push(file)
    }
    return applied
  })
}

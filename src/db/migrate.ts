// Applies db/migrations/*.sql in name order, each recorded in schema_migrations, while the
// previous version may still be serving (docs/migrations.md):
// - one session-level advisory lock for the whole run, so replicas starting together apply each
//   file once (the previous releases took the same key transaction-scoped: they exclude too);
// - one transaction per file, so a file's locks are released when it commits, not held across
//   the files after it;
// - every file under lock_timeout and statement_timeout: a migration that would queue behind a
//   long transaction (and make every query on that table queue behind it) gives up quickly,
//   rolls back and is tried again after a pause, instead of failing the start.
import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Sql } from './client.js'
import { migrationsDir } from '../paths.js'

const LOCK_ID = 7_346_110_201 // arbitrary constant shared by every replica
const LOCK_NOT_AVAILABLE = '55P03'

export interface MigrateOptions {
  /** How long one statement may wait for a table lock (default 5 s). */
  lockTimeoutMs?: number
  /** How long one statement may run (default 10 min: a backfill over a large table). */
  statementTimeoutMs?: number
  /** Tries of a file whose lock wait timed out, before the start fails (default 5). */
  attempts?: number
  /** Pause before the n-th retry: n × this (default 1 s). */
  retryPauseMs?: number
}

const isLockTimeout = (err: unknown) => (err as { code?: string }).code === LOCK_NOT_AVAILABLE

export async function migrate(sql: Sql, dir = migrationsDir, options: MigrateOptions = {}): Promise<string[]> {
  const { lockTimeoutMs = 5_000, statementTimeoutMs = 600_000, attempts = 5, retryPauseMs = 1_000 } = options
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort()
  // One connection for the run: the advisory lock is the session's (and PGlite has one only).
  const conn = (await sql.reserve()) as unknown as Sql & { release(): void }
  try {
    await conn`select pg_advisory_lock(${LOCK_ID})`
    try {
      await conn`create table if not exists schema_migrations (
        name text primary key,
        applied_at timestamptz not null default now()
      )`
      const done = new Set((await conn<{ name: string }[]>`select name from schema_migrations`).map((r) => r.name))
      const applied: string[] = []
      for (const file of files) {
        if (done.has(file)) continue
        const text = await readFile(path.join(dir, file), 'utf8')
        for (let attempt = 1; ; attempt++) {
          try {
            await applyFile(conn, file, text, lockTimeoutMs, statementTimeoutMs)
            break
          } catch (err) {
            if (!isLockTimeout(err) || attempt >= attempts) throw err
            await sleep(retryPauseMs * attempt)
          }
        }
        applied.push(file)
      }
      return applied
    } finally {
      await conn`select pg_advisory_unlock(${LOCK_ID})`.catch(() => {})
    }
  } finally {
    conn.release()
  }
}

async function applyFile(
  conn: Sql,
  file: string,
  text: string,
  lockTimeoutMs: number,
  statementTimeoutMs: number,
): Promise<void> {
  await conn`begin`
  try {
    // set_config(..., true) is SET LOCAL: back to the session's values at COMMIT.
    await conn`select set_config('lock_timeout', ${`${lockTimeoutMs}ms`}, true), set_config('statement_timeout', ${`${statementTimeoutMs}ms`}, true)`
    await conn.unsafe(text)
    await conn`insert into schema_migrations (name) values (${file})`
    await conn`commit`
  } catch (err) {
    await conn`rollback`.catch(() => {})
    throw err
  }
}

// How much of a table's files the OS page cache holds, and taking them out of it, for the
// telemetry bench's drop. A day's partition that retention drops was written weeks ago and is not
// read by any KPI window; the seed wrote it minutes ago. Freeing a file's cached pages is part of
// what its deletion costs, so the bench drops one day as the seed left it and one as it would lie
// at retention age. Only where PostgreSQL runs on this machine and its data directory is
// readable (the bench runs as its owner or root); otherwise nothing is measured or evicted.
import { execFileSync } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type postgres from 'postgres'

/** The files of `table`, its indexes and its TOAST (every fork and segment), or null when unreadable. */
export async function relationFiles(sql: postgres.Sql, table: string): Promise<string[] | null> {
  try {
    const [setting] = await sql<{ dir: string }[]>`select current_setting('data_directory') as dir`
    const rows = await sql<{ path: string }[]>`
      with t as (select ${table}::regclass::oid as oid),
      rels as (
        select oid from t
        union all select reltoastrelid from pg_class where oid = (select oid from t) and reltoastrelid <> 0
        union all select indexrelid from pg_index
          where indrelid in (select oid from t union all select reltoastrelid from pg_class where oid = (select oid from t))
      )
      select pg_relation_filepath(oid) as path from rels`
    const files: string[] = []
    for (const { path } of rows) {
      const folder = join(setting!.dir, dirname(path))
      const base = path.slice(path.lastIndexOf('/') + 1)
      for (const f of readdirSync(folder))
        if (f === base || f.startsWith(`${base}.`) || f.startsWith(`${base}_`)) files.push(join(folder, f))
    }
    return files
  } catch {
    return null
  }
}

/** Bytes of `files` in the page cache (util-linux fincore). */
export function residentBytes(files: string[]): number {
  if (files.length === 0) return 0
  const out = execFileSync('fincore', ['--bytes', '--noheadings', '--output', 'RES', ...files], { encoding: 'utf8' })
  return out
    .split('\n')
    .filter(Boolean)
    .reduce((sum, line) => sum + Number(line.trim()), 0)
}

/** Asks the kernel to drop `files`' clean cached pages (GNU dd: `iflag=nocache count=0`, a posix_fadvise DONTNEED). */
export function evict(files: string[]): void {
  for (const f of files) execFileSync('dd', [`if=${f}`, 'iflag=nocache', 'count=0', 'status=none'])
}

// The migration rules of docs/migrations.md, checked on a real PostgreSQL: the files are applied
// one at a time to a fresh database whose every table holds a row before each file, each
// statement on its own inside the file's transaction, and the ACCESS EXCLUSIVE locks each
// statement takes are read from pg_locks. A statement that takes one on a table with rows, or
// that adds a NOT NULL column without a default, needs its reason in a marker comment directly
// above it:
//   -- migration-safety: access-exclusive: <reason>
//   -- migration-safety: not-null-without-default: <reason>
import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import postgres from 'postgres'

export type Rule = 'access-exclusive' | 'not-null-without-default'
/** What a check can report: a rule broken, or a statement that fails on a table with rows. */
export type Finding = Rule | 'fails'

export interface Statement {
  text: string
  /** 1-based line of the statement's first character in its file. */
  line: number
  /** Marker reasons found in the comment lines directly above it. */
  markers: Partial<Record<Rule, string>>
}

export interface Violation {
  file: string
  line: number
  rule: Finding
  detail: string
}

const MARKER = /^--\s*migration-safety:\s*(access-exclusive|not-null-without-default):\s*(\S.*)$/

/** Splits a file into statements (quotes, dollar quotes and comments respected). */
export function splitStatements(sql: string): Statement[] {
  const statements: Statement[] = []
  let start = 0 // where the current statement's preamble begins
  let codeStart = -1
  let i = 0
  const finish = (end: number) => {
    if (codeStart !== -1) {
      const preamble = sql.slice(start, codeStart)
      statements.push({
        text: sql.slice(codeStart, end).trim(),
        line: sql.slice(0, codeStart).split('\n').length,
        markers: markersAbove(preamble),
      })
    }
    start = end + 1
    codeStart = -1
  }
  while (i < sql.length) {
    const c = sql[i]!
    if (c === '-' && sql[i + 1] === '-') {
      const eol = sql.indexOf('\n', i)
      i = eol === -1 ? sql.length : eol + 1
      continue
    }
    if (c === '/' && sql[i + 1] === '*') {
      const end = sql.indexOf('*/', i + 2)
      i = end === -1 ? sql.length : end + 2
      continue
    }
    if (/\s/.test(c)) {
      i++
      continue
    }
    if (codeStart === -1 && c !== ';') codeStart = i
    if (c === ';') {
      finish(i)
      i++
      continue
    }
    if (c === "'" || c === '"') {
      const end = sql.indexOf(c, i + 1)
      i = end === -1 ? sql.length : end + 1
      continue
    }
    if (c === '$') {
      const tag = /^\$[A-Za-z_]*\$/.exec(sql.slice(i))?.[0]
      if (tag) {
        const end = sql.indexOf(tag, i + tag.length)
        i = end === -1 ? sql.length : end + tag.length
        continue
      }
    }
    i++
  }
  finish(sql.length)
  return statements
}

/** Markers in the run of `--` lines that ends right above the statement (no blank line between). */
function markersAbove(preamble: string): Statement['markers'] {
  const lines = preamble.split('\n')
  lines.pop() // the statement's own line, up to its first character
  const markers: Statement['markers'] = {}
  for (let k = lines.length - 1; k >= 0; k--) {
    const line = lines[k]!.trim()
    if (!line.startsWith('--')) break
    const m = MARKER.exec(line)
    if (m) markers[m[1] as Rule] ??= m[2]!.trim()
  }
  return markers
}

const stripComments = (text: string) => text.replace(/--[^\n]*/g, ' ').replace(/\/\*[\s\S]*?\*\//g, ' ')

/** Splits at commas outside parentheses. */
function topLevelParts(text: string): string[] {
  const parts: string[] = []
  let depth = 0
  let from = 0
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (c === '(') depth++
    else if (c === ')') depth--
    else if (c === ',' && depth === 0) {
      parts.push(text.slice(from, i))
      from = i + 1
    }
  }
  parts.push(text.slice(from))
  return parts
}

/** The columns an ALTER TABLE adds as NOT NULL without a default (or identity/generated value). */
export function notNullWithoutDefault(statement: string): string[] {
  const text = stripComments(statement).replace(/\s+/g, ' ').trim()
  const head = /^alter table (?:if exists )?(?:only )?[\w."]+ /i.exec(text)
  if (!head) return []
  const found: string[] = []
  for (const action of topLevelParts(text.slice(head[0].length))) {
    const add = /^\s*add (?:column )?(?:if not exists )?("?[\w]+"?)(.*)$/i.exec(action)
    if (!add || /^(constraint|primary|unique|check|foreign|exclude)$/i.test(add[1]!)) continue
    const rest = add[2]!
    if (/\bnot null\b/i.test(rest) && !/\b(default|generated)\b/i.test(rest)) found.push(add[1]!)
  }
  return found
}

type Db = postgres.Sql<Record<string, never>>

/** Puts one row in every empty table of the public schema (parents before children). */
export async function seedEmptyTables(sql: Db): Promise<void> {
  const tables = await sql<{ oid: number; name: string }[]>`
    select c.oid::int, c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition and c.relname <> 'schema_migrations'
    order by c.relname`
  let pending: { name: string; error?: string }[] = []
  for (const { name } of tables) {
    const [{ has } = { has: false }] = await sql.unsafe<{ has: boolean }[]>(
      `select exists (select 1 from "${name}") as has`,
    )
    if (!has) pending.push({ name })
  }
  // A child whose parent is still empty fails on its foreign key: it is tried again next round.
  for (let round = 0; round < 5 && pending.length > 0; round++) {
    const failed: typeof pending = []
    for (const table of pending) {
      try {
        await sql.unsafe(await genericInsert(sql, table.name))
      } catch (err) {
        failed.push({ name: table.name, error: (err as Error).message })
      }
    }
    pending = failed
  }
  if (pending.length > 0) throw new Error(`cannot seed: ${pending.map((p) => `${p.name} (${p.error})`).join('; ')}`)
}

/** An INSERT of one row: a neutral value for each NOT NULL column without a default. */
async function genericInsert(sql: Db, table: string): Promise<string> {
  const columns = await sql<{ column_name: string; udt_name: string }[]>`
    select column_name, udt_name from information_schema.columns
    where table_schema = 'public' and table_name = ${table} and is_nullable = 'NO'
      and column_default is null and is_identity = 'NO' and is_generated = 'NEVER'
    order by ordinal_position`
  const references = await sql<{ column_name: string; ref_table: string; ref_column: string }[]>`
    select a.attname as column_name, rc.relname as ref_table, ra.attname as ref_column
    from pg_constraint k
    join pg_class c on c.oid = k.conrelid
    join pg_class rc on rc.oid = k.confrelid
    join pg_attribute a on a.attrelid = k.conrelid and a.attnum = k.conkey[1]
    join pg_attribute ra on ra.attrelid = k.confrelid and ra.attnum = k.confkey[1]
    where k.contype = 'f' and c.relname = ${table} and array_length(k.conkey, 1) = 1`
  const refOf = new Map(references.map((r) => [r.column_name, r]))
  if (columns.length === 0) return `insert into "${table}" default values`
  const values = columns.map(({ column_name, udt_name }) => {
    const ref = refOf.get(column_name)
    if (ref) return `(select "${ref.ref_column}" from "${ref.ref_table}" limit 1)`
    if (udt_name.startsWith('_')) return `'{}'`
    // An epoch-ms column (a time partition key, say) gets now, so that a current partition takes the row.
    if (udt_name === 'int8' && column_name.endsWith('_ms')) return String(Date.now())
    if (/^(int[248]|numeric|float[48])$/.test(udt_name)) return '0'
    if (udt_name === 'uuid') return 'gen_random_uuid()'
    if (udt_name === 'bool') return 'false'
    if (/^(timestamptz|timestamp|date)$/.test(udt_name)) return 'now()'
    if (/^jsonb?$/.test(udt_name)) return `'{}'`
    return `'A'`
  })
  return `insert into "${table}" (${columns.map((c) => `"${c.column_name}"`).join(', ')}) values (${values.join(', ')})`
}

/**
 * Applies every file of `dir` in name order to the (fresh) database at `url`, seeding before
 * each, and returns the statements that break a rule without a marker.
 */
export async function checkMigrations(
  url: string,
  dir: string,
): Promise<{ violations: Violation[]; applied: string[] }> {
  const sql = postgres(url, { max: 1, onnotice: () => {} }) as unknown as Db
  const violations: Violation[] = []
  const applied: string[] = []
  try {
    const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort()
    for (const file of files) {
      await seedEmptyTables(sql)
      // Tables (and their partitions) that hold rows right now, by oid.
      const withRows = new Map<number, string>()
      const tables = await sql<{ oid: number; name: string }[]>`
        select c.oid::int, c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'public' and c.relkind in ('r', 'p')`
      for (const { oid, name } of tables) {
        const [{ has } = { has: false }] = await sql.unsafe<{ has: boolean }[]>(
          `select exists (select 1 from "${name}") as has`,
        )
        if (has) withRows.set(oid, name)
      }
      const statements = splitStatements(await readFile(path.join(dir, file), 'utf8'))
      let failed = false
      // postgres.js rethrows a failed statement's error from begin() even when it was caught.
      await sql
        .begin(async (tx) => {
          let held = new Set<number>()
          for (const statement of statements) {
            for (const column of notNullWithoutDefault(statement.text)) {
              if (!statement.markers['not-null-without-default']) {
                violations.push({
                  file,
                  line: statement.line,
                  rule: 'not-null-without-default',
                  detail: `adds NOT NULL column ${column} without a default`,
                })
              }
            }
            try {
              await tx.unsafe(statement.text)
            } catch (err) {
              violations.push({ file, line: statement.line, rule: 'fails', detail: (err as Error).message })
              failed = true
              return
            }
            const locks = await tx<{ oid: number }[]>`
            select relation::int as oid from pg_locks
            where pid = pg_backend_pid() and locktype = 'relation' and mode = 'AccessExclusiveLock'`
            const now = new Set(locks.map((l) => l.oid))
            for (const oid of now) {
              if (held.has(oid) || !withRows.has(oid)) continue
              if (!statement.markers['access-exclusive']) {
                violations.push({
                  file,
                  line: statement.line,
                  rule: 'access-exclusive',
                  detail: `takes ACCESS EXCLUSIVE on ${withRows.get(oid)}, which has rows`,
                })
              }
            }
            held = now
          }
        })
        .catch((err) => {
          if (!failed) throw err
        })
      // The database is not what the next file expects: stop here.
      if (failed) break
      applied.push(file)
    }
  } finally {
    await sql.end()
  }
  return { violations, applied }
}

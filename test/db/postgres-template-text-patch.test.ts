// patches/postgres+3.4.9.patch: postgres.js built the SQL text of a tagged template on every
// execution (a string concatenation per value, fragments included). The patch keeps the text
// per template and shape of its values (which are parameters, which are fragments) and reuses
// it while the shape holds; parameters still come from every execution. Here, through both of
// the driver's builds: results are right whatever the shapes one call site alternates between,
// and a template whose shape holds is not read again.
import t from 'tap'
import { createRequire } from 'node:module'
import postgres from 'postgres'
import { ADMIN_URL } from '../helpers/database.js'

const require = createRequire(import.meta.url)
const builds: [string, typeof postgres][] = [
  ['ES module build', postgres],
  ['CommonJS build', require('postgres') as typeof postgres],
]

type Sql = ReturnType<typeof postgres>
type Row = { a: number; mid: unknown; b: string }

for (const [build, driver] of builds) {
  t.test(`${build}: one call site, alternating shapes, right parameters every time`, async (t) => {
    const sql: Sql = driver(ADMIN_URL, { max: 2, onnotice: () => {} })
    t.teardown(() => sql.end())
    // One call site; the middle value is a parameter, a fragment or a helper by turns.
    const pick = (a: number, mid: unknown, b: string) =>
      sql<Row[]>`select ${a}::int as a, ${mid as never} as mid, ${b}::text as b from (select 99 as col) t`
    const middles: [string, () => unknown, unknown][] = [
      ['a parameter', () => 'plain', 'plain'],
      ['a fragment with parameters', () => sql`${7}::int + ${8}::int`, 15],
      ['unsafe text', () => sql.unsafe('40 + 2'), 42],
      ['a nested fragment', () => sql`(${sql`${2}::int * ${5}::int`}) + ${1}::int`, 11],
      ['another fragment template', () => sql`${1}::int + 1`, 2],
      ['an identifier', () => sql('col'), 99],
      ['a parameter again', () => 'again', 'again'],
    ]
    for (let round = 0; round < 3; round++) {
      for (const [i, [what, middle, expected]] of middles.entries()) {
        const a = round * 100 + i
        const b = `b-${round}-${i}`
        const [row] = await pick(a, middle(), b)
        t.same(row, { a, mid: expected, b }, `round ${round}: ${what}`)
      }
    }
    // Values concurrently in flight on one template with two shapes.
    const rows = await Promise.all(Array.from({ length: 40 }, (_, i) => pick(i, i % 2 ? sql`${i}::int * 2` : `v${i}`, `b${i}`)))
    t.same(rows.map(([r]) => r), Array.from({ length: 40 }, (_, i) => ({ a: i, mid: i % 2 ? i * 2 : `v${i}`, b: `b${i}` })))
  })

  t.test(`${build}: a template whose shape holds is not read again; a new shape is`, async (t) => {
    const sql: Sql = driver(ADMIN_URL, { max: 1, onnotice: () => {} })
    t.teardown(() => sql.end())
    const text = ['select ', '::int as n, ', ' as m']
    const strings = Object.assign([...text], { raw: [...text] }) as unknown as TemplateStringsArray
    t.same(await sql(strings, 1, 'x'), [{ n: 1, m: 'x' }])
    let reads = 0
    Object.defineProperty(strings, 0, {
      get: () => {
        reads++
        return text[0]
      },
    })
    t.same(await sql(strings, 2, 'y'), [{ n: 2, m: 'y' }])
    t.same(await sql(strings, 3, 'z'), [{ n: 3, m: 'z' }])
    t.equal(reads, 0, 'the text was reused')
    t.same(await sql(strings, 4, sql`${5}::int`), [{ n: 4, m: 5 }])
    t.ok(reads > 0, 'another shape is built anew')
  })
}

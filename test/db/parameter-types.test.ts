// postgres.js 4 lets the server decide a parameter's type (its default, `infer: false`), where
// 3.x typed a Date as timestamptz itself. That changes nothing here as long as no column holds a
// timestamp without time zone, a date or a time: a Date written to one of those outside UTC
// would move (postgres.js's "Upgrading from v3"). This is its query, on the migrated schema.
import t from 'tap'
import { createTestDatabase } from '../helpers/database.js'

t.test('every time column is timestamptz, so server-decided parameter types write Dates as before', async (t) => {
  const db = await createTestDatabase(t)
  const columns = await db.sql`
    select table_name, column_name, data_type from information_schema.columns
    where data_type in ('timestamp without time zone', 'date', 'time without time zone')
      and table_schema not in ('pg_catalog', 'information_schema')`
  t.same(columns, [], 'no timestamp, date or time column')
  const [stamped] = await db.sql`
    select count(*)::int as n from information_schema.columns
    where data_type = 'timestamp with time zone' and table_schema = 'public'`
  t.ok(stamped!.n > 0, `the schema's ${stamped!.n} time columns are timestamptz`)
})

t.test('a Date where the statement decides no type needs its cast', async (t) => {
  const db = await createTestDatabase(t)
  const at = new Date('2026-12-07T23:30:00Z')
  const [cast] = await db.sql`select ${at}::timestamptz + interval '1 day' as next`
  t.same(cast!.next, new Date('2026-12-08T23:30:00Z'), 'with ::timestamptz')
  await t.rejects(
    db.sql`select ${at} + interval '1 day' as next`,
    { code: '22007' },
    'without it the server reads an interval',
  )
})

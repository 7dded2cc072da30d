// A statement span's name and attributes from its text (src/db/statement-names.ts): the operation and
// its table, as OpenTelemetry's database conventions name them.
import t from 'tap'
import { describeStatement } from '../../src/db/statement-names.js'

t.test('an operation and the table it reads or writes', async (t) => {
  t.equal(describeStatement('insert into users (a) values ($1)').name, 'INSERT users')
  t.equal(describeStatement('  update conspectuses set a = $1').name, 'UPDATE conspectuses')
  t.equal(describeStatement('delete from error_logs where a = $1').name, 'DELETE error_logs')
  t.equal(describeStatement('select a from users where b = $1').name, 'SELECT users')
  t.equal(describeStatement('begin').name, 'BEGIN')
})

t.test("a day's partition is named by its pattern, its table kept as an attribute", async (t) => {
  const drop = describeStatement('drop table docs_search_archive_20261207')
  t.equal(
    describeStatement('delete from docs_search_events_20261207 where a = $1').name,
    'DELETE docs_search_events_YYYYMMDD',
  )
  t.equal(
    describeStatement('delete from docs_search_events_20261207 where a = $1').attributes['db.collection.name'],
    'docs_search_events_20261207',
  )
  t.equal(drop.name, 'DROP')
})

t.test('a read is named by its first table after FROM or JOIN, never by `from null`', async (t) => {
  const lookup = describeStatement(`select a.x, r is distinct from null as read_found, r.*
    from (select) one left join idempotency_records a on true left join (select 1 from users) r on true`)
  t.equal(lookup.name, 'SELECT idempotency_records')
  t.equal(lookup.attributes['db.collection.name'], 'idempotency_records')
})

t.test('a WITH statement is named by the first statement it modifies with', async (t) => {
  const write = describeStatement(`with written as (update conspectuses set a = $1 where xmin = $2::xid returning 1)
    insert into idempotency_records (k) select $3 from written`)
  t.equal(write.name, 'UPDATE conspectuses')
  t.equal(write.attributes['db.operation.name'], 'UPDATE')
  t.equal(describeStatement('with x as (select 1 from users) select * from x').name, 'WITH users')
})

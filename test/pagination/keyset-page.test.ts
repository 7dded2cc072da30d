// One keyset page from rows read with `limit + 1`: the extra row only says whether more follow.
import t from 'tap'
import { keysetPage } from '../../src/pagination/keyset-page.js'

const rows = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ id: `n${i}`, position_ts: `2026-11-28T00:00:0${i}.000001Z` }))

t.test('exactly `limit` rows: the last page, no position to go on from', async (t) => {
  t.same(
    keysetPage(rows(3), 3, (r) => r.id),
    { items: rows(3).map(({ id }) => ({ id })), next: null },
  )
})

t.test('one row more than `limit`: the page stops at `limit` and goes on from its last row', async (t) => {
  t.same(
    keysetPage(rows(4), 3, (r) => r.id),
    {
      items: rows(3).map(({ id }) => ({ id })),
      next: { created_at: '2026-11-28T00:00:02.000001Z', id: 'n2' },
    },
  )
})

t.test('no rows: an empty last page', async (t) => {
  t.same(
    keysetPage(rows(0), 3, (r) => r.id),
    { items: [], next: null },
  )
})

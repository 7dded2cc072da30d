// One keyset page from rows read with `limit + 1`: the extra row only says whether more follow.
import type { TimeKeyPosition } from './cursor.js'

/**
 * The first `limit` rows without their `position_ts` (the row's created_at as exact text), and
 * the position of the last one when more rows follow (null on the last page).
 */
export function keysetPage<Row extends { position_ts: string }>(
  rows: Row[],
  limit: number,
  idOf: (row: Row) => string,
): { items: Omit<Row, 'position_ts'>[]; next: TimeKeyPosition | null } {
  const hasMore = rows.length > limit
  const items = rows.slice(0, limit)
  const last = items[items.length - 1]
  const next = hasMore && last ? { created_at: last.position_ts, id: idOf(last) } : null
  return { items: items.map(({ position_ts: _omit, ...item }) => item), next }
}

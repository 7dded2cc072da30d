// SQL for conspectuses (table conspectuses), always scoped to the owning user's client_uuid.
import type { Db } from '../db/client.js'
import type { components } from '../../generated/api.js'
import type { Slot } from '../schedule/leitner.js'

export type Conspectus = components['schemas']['ConspectusResponse']
export type ScheduleCounts = { total: number; due_now_count: number; slots: Record<Slot, number> }

export interface NewConspectus {
  title: string | null
  cue_sheet: Record<string, unknown>
  dense_paragraph: string
  bullets: string[]
  slot: Slot
  next_review_at: Date
  created_at: Date
}

export type ConspectusContent = Partial<Pick<NewConspectus, 'title' | 'cue_sheet' | 'dense_paragraph' | 'bullets'>>

export interface ReviewChange {
  slot: Slot
  next_review_at: Date
  reviewed_at: Date
}

export function createConspectusRepository(db: Db) {
  // The response shape: the conspectus plus its owner's natural key.
  const withOwner = (userId: string, where: ReturnType<Db>) => db<Conspectus[]>`
    select c.conspectus_uuid, u.system_user_id, u.system_uuid, c.title, c.cue_sheet, c.dense_paragraph,
           c.bullets, c.slot, c.next_review_at, c.last_reviewed_at, c.review_count, c.created_at, c.updated_at
    from conspectuses c join users u on u.client_uuid = c.user_id
    where c.user_id = ${userId} and ${where}`

  return {
    async create(userId: string, c: NewConspectus): Promise<Conspectus> {
      const [row] = await db<{ conspectus_uuid: string }[]>`
        insert into conspectuses (user_id, title, cue_sheet, dense_paragraph, bullets, slot, next_review_at, created_at, updated_at)
        values (${userId}, ${c.title}, ${db.json(c.cue_sheet as never)}, ${c.dense_paragraph}, ${c.bullets},
                ${c.slot}, ${c.next_review_at}, ${c.created_at}, ${c.created_at})
        returning conspectus_uuid`
      const [created] = await withOwner(userId, db`c.conspectus_uuid = ${row!.conspectus_uuid}`)
      return created!
    },

    /** The user's conspectus, locked for the rest of the transaction; undefined if not theirs. */
    async findForUpdate(userId: string, conspectusUuid: string): Promise<{ slot: Slot } | undefined> {
      const [row] = await db<{ slot: Slot }[]>`
        select slot from conspectuses where conspectus_uuid = ${conspectusUuid} and user_id = ${userId} for update`
      return row
    },

    async exists(userId: string, conspectusUuid: string): Promise<boolean> {
      const rows = await db`select 1 from conspectuses where conspectus_uuid = ${conspectusUuid} and user_id = ${userId}`
      return rows.length === 1
    },

    /** Changes content only; undefined when the conspectus is not the user's. */
    async updateContent(userId: string, conspectusUuid: string, content: ConspectusContent, at: Date): Promise<Conspectus | undefined> {
      const changes: Record<string, unknown> = { ...content, updated_at: at }
      if (content.cue_sheet !== undefined) changes.cue_sheet = db.json(content.cue_sheet as never)
      const updated = await db`
        update conspectuses set ${db(changes)}
        where conspectus_uuid = ${conspectusUuid} and user_id = ${userId}
        returning 1`
      if (updated.length === 0) return undefined
      const [row] = await withOwner(userId, db`c.conspectus_uuid = ${conspectusUuid}`)
      return row
    },

    async recordReview(userId: string, conspectusUuid: string, change: ReviewChange): Promise<Conspectus> {
      await db`
        update conspectuses
        set slot = ${change.slot}, next_review_at = ${change.next_review_at}, last_reviewed_at = ${change.reviewed_at},
            review_count = review_count + 1, updated_at = ${change.reviewed_at}
        where conspectus_uuid = ${conspectusUuid} and user_id = ${userId}`
      const [row] = await withOwner(userId, db`c.conspectus_uuid = ${conspectusUuid}`)
      return row!
    },

    /** Due at `asOf`, oldest due first; served by the conspectuses_due index. */
    async listDue(userId: string, asOf: Date, limit: number): Promise<Conspectus[]> {
      return db<Conspectus[]>`
        select c.conspectus_uuid, u.system_user_id, u.system_uuid, c.title, c.cue_sheet, c.dense_paragraph,
               c.bullets, c.slot, c.next_review_at, c.last_reviewed_at, c.review_count, c.created_at, c.updated_at
        from conspectuses c join users u on u.client_uuid = c.user_id
        where c.user_id = ${userId} and c.next_review_at <= ${asOf}
        order by c.next_review_at, c.conspectus_uuid
        limit ${limit}`
    },

    /** Slot histogram and due count in one index-only scan. */
    async scheduleCounts(userId: string, asOf: Date): Promise<ScheduleCounts> {
      const [row] = await db<{ total: number; due: number; a: number; b: number; c: number; d: number }[]>`
        select count(*)::int as total,
               count(*) filter (where next_review_at <= ${asOf})::int as due,
               count(*) filter (where slot = 'A')::int as a,
               count(*) filter (where slot = 'B')::int as b,
               count(*) filter (where slot = 'C')::int as c,
               count(*) filter (where slot = 'D')::int as d
        from conspectuses where user_id = ${userId}`
      return { total: row!.total, due_now_count: row!.due, slots: { A: row!.a, B: row!.b, C: row!.c, D: row!.d } }
    },
  }
}

export type ConspectusRepository = ReturnType<typeof createConspectusRepository>

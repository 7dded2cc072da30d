// Writes for a learner racing the learner's erasure: each lands before the erasure (and is erased
// with it) or answers 404 after it; never a 5xx, never a note or error log without its owner,
// never a stored answer that still holds the learner.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { buildTestApp } from '../helpers/app.js'
import { createConspectus } from '../helpers/fixtures.js'

const api = await buildTestApp(t)
const { sql } = api.db

async function race(round: number) {
  const tag = `race${round}-${randomUUID().slice(0, 8)}`
  const owner = { system_user_id: tag, system_uuid: randomUUID() }
  const userUrl = `/api/v1/user/${owner.system_uuid}/${tag}`
  const created = await api.post('/api/v1/user', { ...owner, full_name: `Name ${tag}` })
  if (created.statusCode !== 201) throw new Error(`create: ${created.statusCode}`)
  const notes = [await createConspectus(api, owner), await createConspectus(api, owner)]
  const writes = (i: number) => {
    const note = notes[i % notes.length].conspectus_uuid as string
    return [
      api.post('/api/v1/conspectuses', { ...owner, cue_sheet: {}, dense_paragraph: `para ${tag} ${i}`, bullets: [] }),
      api.post('/api/v1/errors', { ...owner, message: `msg ${tag} ${i}`, conspectus_uuid: note }),
      api.post('/api/v1/errors', { ...owner, message: `free ${tag} ${i}` }),
      api.post(`/api/v1/conspectuses/${note}/actions/review`, { ...owner, outcome: 'remembered' }),
      api.patch(`/api/v1/conspectuses/${note}`, { ...owner, title: `title ${tag} ${i}` }),
      api.put(userUrl, { full_name: `Put ${tag} ${i}`, timezone: 'UTC' }),
      api.patch(userUrl, { username: `user ${tag} ${i}` }),
      api.request({
        method: 'DELETE',
        url: `/api/v1/conspectuses/${note}?system_user_id=${tag}&system_uuid=${owner.system_uuid}`,
      }),
    ]
  }
  // The erasure starts among the writes: some before it, some after. It is sent once one of the
  // first writes has landed, so each round holds writes that the erasure must take with it.
  const before = Array.from({ length: 2 }, (_, i) => writes(i)).flat()
  await Promise.race(before)
  const erasure = api.request({ method: 'DELETE', url: userUrl })
  const after = Array.from({ length: 2 }, (_, i) => writes(i + 2)).flat()
  const answers = await Promise.all([...before, ...after])
  const erased = await erasure
  return { tag, erased, answers }
}

t.test('writes racing the erasure land before it or answer 404; nothing of the learner is left', async (t) => {
  const statuses = new Map<string, number>()
  for (let round = 0; round < 12; round++) {
    const { tag, erased, answers } = await race(round)
    t.equal(erased.statusCode, 200, `round ${round}: the erasure answers 200`)
    for (const res of answers) {
      const label = res.statusCode < 300 ? '2xx' : `${res.statusCode} ${res.json().code}`
      statuses.set(label, (statuses.get(label) ?? 0) + 1)
      if (![200, 201, 404].includes(res.statusCode)) t.fail(`round ${round}: ${res.statusCode} ${res.body}`)
    }
    const [left] = await sql`
      select (select count(*) from users where system_user_id = ${tag})::int as users,
             (select count(*) from conspectuses c where not exists (select 1 from users u where u.client_uuid = c.user_id))::int as orphan_notes,
             (select count(*) from error_logs e where not exists (select 1 from users u where u.client_uuid = e.user_id))::int as orphan_logs,
             (select count(*) from idempotency_records where scope like ${`%${tag}%`} or response_body like ${`%${tag}%`})::int as answers`
    t.same(left, { users: 0, orphan_notes: 0, orphan_logs: 0, answers: 0 }, `round ${round}: nothing left`)
  }
  t.ok(statuses.get('2xx'), 'some writes landed before the erasure')
  t.ok(statuses.get('404 USER_404') || statuses.get('404 CONS_404'), 'some answered 404 after it')
  t.comment(JSON.stringify(Object.fromEntries(statuses)))
})

// Small builders shared by tests: users and conspectuses created through the API.
import { randomUUID } from 'node:crypto'
import type { TestApi } from './app.js'

export interface Owner {
  system_user_id: string
  system_uuid: string
}

/** A new user; returns only its natural key, ready to spread into bodies and queries. */
export async function createOwner(api: TestApi, extra: Record<string, unknown> = {}): Promise<Owner> {
  const body = {
    system_user_id: `o-${randomUUID().slice(0, 8)}`,
    system_uuid: randomUUID(),
    full_name: 'Owner',
    ...extra,
  }
  const res = await api.post('/api/v1/user', body)
  if (res.statusCode !== 201) throw new Error(`createOwner: ${res.statusCode} ${res.body}`)
  return { system_user_id: body.system_user_id, system_uuid: body.system_uuid }
}

export const conspectusBody = (owner: Owner, extra: Record<string, unknown> = {}) => ({
  system_user_id: owner.system_user_id,
  system_uuid: owner.system_uuid,
  title: 'Photosynthesis',
  cue_sheet: {
    topic: 'Photosynthesis',
    rows: [{ keywords: 'chlorophyll', question: 'What absorbs light?', hint: 'green' }],
  },
  dense_paragraph: 'Plants turn light, water and CO2 into glucose and oxygen.',
  bullets: ['Light reactions make ATP', 'The Calvin cycle fixes CO2'],
  ...extra,
})

export async function createConspectus(api: TestApi, owner: Owner, extra: Record<string, unknown> = {}) {
  const res = await api.post('/api/v1/conspectuses', conspectusBody(owner, extra))
  if (res.statusCode !== 201) throw new Error(`createConspectus: ${res.statusCode} ${res.body}`)
  return res.json()
}

export const ownerQuery = (owner: Owner) =>
  `system_user_id=${encodeURIComponent(owner.system_user_id)}&system_uuid=${owner.system_uuid}`

/** A clock the test moves by hand. */
export function manualClock(start: string) {
  let current = new Date(start)
  return {
    now: () => new Date(current),
    set: (iso: string) => {
      current = new Date(iso)
    },
  }
}

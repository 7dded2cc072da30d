// A downstream client as partners build it: types generated from the served /openapi.json by
// openapi-typescript, calls made with openapi-fetch. No hand-written types, no hand edits.
import createClient from 'openapi-fetch'
import type { paths } from './api.js'

export async function walk(baseUrl: string, apiKey: string, id: string) {
  const client = createClient<paths>({ baseUrl, headers: { 'X-API-Key': apiKey } })
  const owner = { system_user_id: `client-${id}`, system_uuid: '0b3d2c1a-4e5f-4a6b-8c7d-9e0f1a2b3c4d' }
  const key = (step: string) => ({ header: { 'Idempotency-Key': `${id}-${step}` } })

  const created = await client.POST('/api/v1/user', { params: key('create'), body: { ...owner, full_name: 'Client Walker', timezone: 'Europe/Berlin' } })
  if (!created.data) throw new Error(`create user: ${created.response.status}`)

  const read = await client.GET('/api/v1/user/{system_uuid}/{system_user_id}', { params: { path: owner } })
  if (read.data?.client_uuid !== created.data.client_uuid) throw new Error('read user')

  const patched = await client.PATCH('/api/v1/user/{system_uuid}/{system_user_id}', { params: { path: owner, ...key('patch') }, body: { username: 'walker' } })
  if (patched.data?.username !== 'walker') throw new Error('patch user')

  const note = await client.POST('/api/v1/conspectuses', {
    params: key('note'),
    body: { ...owner, title: 'Walk', cue_sheet: { topic: 'Clients', rows: [] }, dense_paragraph: 'Generated types keep clients honest.', bullets: ['typed'] },
  })
  if (note.data?.slot !== 'A') throw new Error('create conspectus')

  const reviewed = await client.POST('/api/v1/conspectuses/{conspectus_uuid}/actions/review', {
    params: { path: { conspectus_uuid: note.data.conspectus_uuid }, ...key('review') },
    body: { ...owner, outcome: 'remembered' },
  })
  if (reviewed.data?.slot !== 'B' || reviewed.data.review_count !== 1) throw new Error('review')

  const missing = await client.GET('/api/v1/user/{system_uuid}/{system_user_id}', { params: { path: { ...owner, system_user_id: 'nobody' } } })
  if (!missing.error || !('code' in missing.error) || missing.error.code !== 'USER_404') throw new Error('typed error envelope')

  return { user: patched.data, conspectus: reviewed.data }
}

// openapi-typescript (default flags) + openapi-fetch: every operation once.
import createClient from 'openapi-fetch'
import type { paths } from '../.out/openapi-typescript/api.js'
import { expect, FAR_FUTURE, owner, Recorder } from './common.js'

export async function walk(baseUrl: string, apiKey: string, id: string, strict: boolean) {
  const client = createClient<paths>({ baseUrl, headers: { 'X-API-Key': apiKey } })
  const r = new Recorder()
  const me = owner(id)
  const key = (step: string) => ({ 'Idempotency-Key': `${id}-${step}` })

  r.record('getLive', (await client.GET('/live')).response)
  r.record('getReady', (await client.GET('/ready')).response)
  r.record('getOpenApiDocument', (await client.GET('/openapi.json')).response)
  r.record('getMetrics', (await client.GET('/metrics', { parseAs: 'text' })).response)
  r.record('getArazzoDocument', (await client.GET('/arazzo.yaml', { parseAs: 'text' })).response)

  const created = await client.POST('/api/v1/user', {
    params: { header: key('user') },
    body: { ...me, full_name: 'SDK Walker', timezone: 'Europe/Berlin' },
  })
  r.record('createUser', created.response)
  expect(created.data?.client_uuid, 'createUser data')
  const path = { path: me }
  const read = await client.GET('/api/v1/user/{system_uuid}/{system_user_id}', { params: path })
  r.record('getUserBySystemUserId', read.response)
  if (strict) expect(read.data?.client_uuid === created.data?.client_uuid, 'read the created user')
  const put = await client.PUT('/api/v1/user/{system_uuid}/{system_user_id}', {
    params: { ...path, header: key('put') },
    body: { full_name: 'SDK Walker', timezone: 'Europe/Berlin' },
  })
  r.record('updateUserBySystemUserId', put.response)
  const patched = await client.PATCH('/api/v1/user/{system_uuid}/{system_user_id}', {
    params: { ...path, header: key('patch') },
    body: { username: 'walker' },
  })
  r.record('patchUserBySystemUserId', patched.response)
  if (strict) expect(patched.data?.username === 'walker', 'patch user')

  const note = await client.POST('/api/v1/conspectuses', {
    params: { header: key('note') },
    body: {
      ...me,
      title: 'Walk',
      cue_sheet: { topic: 'SDKs' },
      dense_paragraph: 'Generated clients keep partners honest.',
      bullets: ['typed'],
    },
  })
  r.record('createConspectus', note.response)
  const conspectus_uuid = note.data?.conspectus_uuid ?? ''
  const owned = { query: { ...me, as_of: FAR_FUTURE } }
  r.record('listDueConspectuses', (await client.GET('/api/v1/conspectuses/due', { params: owned })).response)
  const edited = await client.PATCH('/api/v1/conspectuses/{conspectus_uuid}', {
    params: { path: { conspectus_uuid }, header: key('edit') },
    body: { ...me, title: 'Walk (edited)' },
  })
  r.record('patchConspectus', edited.response)
  const reviewed = await client.POST('/api/v1/conspectuses/{conspectus_uuid}/actions/review', {
    params: { path: { conspectus_uuid }, header: key('review') },
    body: { ...me, outcome: 'remembered' },
  })
  r.record('reviewConspectus', reviewed.response)
  if (strict) expect(reviewed.data?.slot === 'B', 'review moves to B')
  r.record('getScheduleSummary', (await client.GET('/api/v1/schedule/summary', { params: owned })).response)

  r.record(
    'createErrorLog',
    (
      await client.POST('/api/v1/errors', {
        params: { header: key('mistake') },
        body: { ...me, message: 'Mixed up slots', conspectus_uuid },
      })
    ).response,
  )
  const logs = await client.GET('/api/v1/errors', { params: { query: { ...me, limit: 10 } } })
  r.record('listErrorLogs', logs.response)
  if (strict) expect(logs.data?.items.length === 1 && logs.data.next_cursor === null, 'one logged mistake')

  r.record(
    'ingestDocsSearchEvent',
    (
      await client.POST('/api/v1/telemetry/docs-search', {
        body: { event: 'search_query', emitted_at_ms: Date.now(), query_id: `q-${id}` },
      })
    ).response,
  )
  r.record(
    'ingestDocsSearchEventBatch',
    (
      await client.POST('/api/v1/telemetry/docs-search/batch', {
        body: { events: [{ event: 'search_result_click', emitted_at_ms: Date.now(), query_id: `q-${id}` }] },
      })
    ).response,
  )
  r.record(
    'getDocsSearchTelemetryMetrics',
    (await client.GET('/api/v1/telemetry/docs-search/metrics', { params: { query: { window_minutes: 60 } } })).response,
  )
  r.record(
    'getDocsSearchTopSearches',
    (await client.GET('/api/v1/telemetry/docs-search/analytics/searches', { params: { query: { limit: 5 } } }))
      .response,
  )
  r.record(
    'getDocsSearchNoResultSearches',
    (
      await client.GET('/api/v1/telemetry/docs-search/analytics/searches/no-results', {
        params: { query: { limit: 5 } },
      })
    ).response,
  )
  r.record(
    'getDocsSearchNoClickSearches',
    (
      await client.GET('/api/v1/telemetry/docs-search/analytics/searches/no-clicks', {
        params: { query: { limit: 5 } },
      })
    ).response,
  )
  r.record(
    'getDocsSearchClickPositions',
    (await client.GET('/api/v1/telemetry/docs-search/analytics/clicks/positions', { params: { query: {} } })).response,
  )
  r.record(
    'getDocsSearchSeries',
    (await client.GET('/api/v1/telemetry/docs-search/analytics/series', { params: { query: { granularity: 'day' } } }))
      .response,
  )
  r.record(
    'eraseDocsSearchSession',
    (
      await client.DELETE('/api/v1/telemetry/docs-search/sessions/{session_id}', {
        params: { path: { session_id: 'walk-session' } },
      })
    ).response,
  )

  // A learner's data: one note, the list, the export, then the note's deletion and the erasure.
  const mine = { query: me }
  r.record(
    'getConspectus',
    (await client.GET('/api/v1/conspectuses/{conspectus_uuid}', { params: { path: { conspectus_uuid }, ...mine } }))
      .response,
  )
  const notes = await client.GET('/api/v1/conspectuses', { params: { query: { ...me, limit: 10 } } })
  r.record('listConspectuses', notes.response)
  if (strict) expect(notes.data?.items.length === 1, 'one note listed')
  r.record(
    'exportUser',
    (await client.GET('/api/v1/user/{system_uuid}/{system_user_id}/export', { params: path })).response,
  )
  r.record(
    'deleteConspectus',
    (await client.DELETE('/api/v1/conspectuses/{conspectus_uuid}', { params: { path: { conspectus_uuid }, ...mine } }))
      .response,
  )
  // By identity: read and export the learner, then erase a second one.
  const byId = { path: { client_uuid: created.data!.client_uuid } }
  r.record('getUserByClientUuid', (await client.GET('/api/v1/users/{client_uuid}', { params: byId })).response)
  r.record(
    'exportUserByClientUuid',
    (await client.GET('/api/v1/users/{client_uuid}/export', { params: byId })).response,
  )
  const second = await client.POST('/api/v1/user', {
    params: { header: key('user-2') },
    body: { ...owner(`${id}-2`), full_name: 'SDK Walker 2' },
  })
  expect(second.data?.client_uuid, 'second createUser data')
  r.record(
    'eraseUserByClientUuid',
    (
      await client.DELETE('/api/v1/users/{client_uuid}', {
        params: { path: { client_uuid: second.data!.client_uuid } },
      })
    ).response,
  )
  r.record('eraseUser', (await client.DELETE('/api/v1/user/{system_uuid}/{system_user_id}', { params: path })).response)

  // Partner keys as data: issue (the secret shown once), read, list, roll, revoke, the audit.
  const keyId = `walk-${id}`
  const issued = await client.POST('/api/v1/admin/keys', {
    params: { header: key('api-key') },
    body: { id: keyId, scopes: ['users:read'] },
  })
  r.record('createApiKey', issued.response)
  if (strict) expect(issued.data?.secret?.startsWith('ssk_'), 'the new secret')
  const keyPath = { params: { path: { key_id: keyId } } }
  r.record('getApiKey', (await client.GET('/api/v1/admin/keys/{key_id}', keyPath)).response)
  r.record('listApiKeys', (await client.GET('/api/v1/admin/keys', { params: { query: { limit: 10 } } })).response)
  r.record(
    'rollApiKey',
    (
      await client.POST('/api/v1/admin/keys/{key_id}/roll', {
        params: { path: { key_id: keyId }, header: key('roll') },
        body: { expires_in_seconds: 0 },
      })
    ).response,
  )
  r.record('revokeApiKey', (await client.DELETE('/api/v1/admin/keys/{key_id}', keyPath)).response)
  r.record(
    'listAdminAudit',
    (await client.GET('/api/v1/admin/audit', { params: { query: { key_id: keyId } } })).response,
  )
  return r.calls
}

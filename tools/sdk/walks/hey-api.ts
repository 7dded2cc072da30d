// @hey-api/openapi-ts (fetch client): every operation once.
import { createClient, createConfig } from '../.out/hey-api/client/index.js'
import * as sdk from '../.out/hey-api/sdk.gen.js'
import { expect, FAR_FUTURE, owner, Recorder } from './common.js'

export async function walk(baseUrl: string, apiKey: string, id: string, strict: boolean) {
  const client = createClient(createConfig({ baseUrl, headers: { 'X-API-Key': apiKey } }))
  const r = new Recorder()
  const me = owner(id)
  const key = (step: string) => ({ 'Idempotency-Key': `${id}-${step}` })
  const done = (operationId: string, res: { response: Response }) => r.record(operationId, res.response)

  done('getLive', await sdk.getLive({ client }))
  done('getReady', await sdk.getReady({ client }))
  done('getOpenApiDocument', await sdk.getOpenApiDocument({ client }))
  done('getMetrics', await sdk.getMetrics({ client, parseAs: 'text' }))
  done('getArazzoDocument', await sdk.getArazzoDocument({ client, parseAs: 'text' }))

  const created = await sdk.createUser({
    client,
    headers: key('user'),
    body: { ...me, full_name: 'SDK Walker', timezone: 'Europe/Berlin' },
  })
  done('createUser', created)
  expect(created.data?.client_uuid, 'createUser data')
  const read = await sdk.getUserBySystemUserId({ client, path: me })
  done('getUserBySystemUserId', read)
  if (strict) expect(read.data?.client_uuid === created.data?.client_uuid, 'read the created user')
  done(
    'updateUserBySystemUserId',
    await sdk.updateUserBySystemUserId({
      client,
      path: me,
      headers: key('put'),
      body: { full_name: 'SDK Walker', timezone: 'Europe/Berlin' },
    }),
  )
  const patched = await sdk.patchUserBySystemUserId({
    client,
    path: me,
    headers: key('patch'),
    body: { username: 'walker' },
  })
  done('patchUserBySystemUserId', patched)
  if (strict) expect(patched.data?.username === 'walker', 'patch user')

  const note = await sdk.createConspectus({
    client,
    headers: key('note'),
    body: {
      ...me,
      title: 'Walk',
      cue_sheet: { topic: 'SDKs' },
      dense_paragraph: 'Generated clients keep partners honest.',
      bullets: ['typed'],
    },
  })
  done('createConspectus', note)
  const conspectus_uuid = note.data?.conspectus_uuid ?? ''
  const owned = { ...me, as_of: FAR_FUTURE }
  done('listDueConspectuses', await sdk.listDueConspectuses({ client, query: owned }))
  done(
    'patchConspectus',
    await sdk.patchConspectus({
      client,
      path: { conspectus_uuid },
      headers: key('edit'),
      body: { ...me, title: 'Walk (edited)' },
    }),
  )
  const reviewed = await sdk.reviewConspectus({
    client,
    path: { conspectus_uuid },
    headers: key('review'),
    body: { ...me, outcome: 'remembered' },
  })
  done('reviewConspectus', reviewed)
  if (strict) expect(reviewed.data?.slot === 'B', 'review moves to B')
  done('getScheduleSummary', await sdk.getScheduleSummary({ client, query: owned }))

  done(
    'createErrorLog',
    await sdk.createErrorLog({
      client,
      headers: key('mistake'),
      body: { ...me, message: 'Mixed up slots', conspectus_uuid },
    }),
  )
  const logs = await sdk.listErrorLogs({ client, query: { ...me, limit: 10 } })
  done('listErrorLogs', logs)
  if (strict) expect(logs.data?.items.length === 1 && logs.data.next_cursor === null, 'one logged mistake')

  done(
    'ingestDocsSearchEvent',
    await sdk.ingestDocsSearchEvent({
      client,
      body: { event: 'search_query', emitted_at_ms: Date.now(), query_id: `q-${id}` },
    }),
  )
  done(
    'ingestDocsSearchEventBatch',
    await sdk.ingestDocsSearchEventBatch({
      client,
      body: { events: [{ event: 'search_result_click', emitted_at_ms: Date.now(), query_id: `q-${id}` }] },
    }),
  )
  done(
    'getDocsSearchTelemetryMetrics',
    await sdk.getDocsSearchTelemetryMetrics({ client, query: { window_minutes: 60 } }),
  )
  done('getDocsSearchTopSearches', await sdk.getDocsSearchTopSearches({ client, query: { limit: 5 } }))
  done('getDocsSearchNoResultSearches', await sdk.getDocsSearchNoResultSearches({ client, query: { limit: 5 } }))
  done('getDocsSearchNoClickSearches', await sdk.getDocsSearchNoClickSearches({ client, query: { limit: 5 } }))
  done('getDocsSearchClickPositions', await sdk.getDocsSearchClickPositions({ client, query: {} }))
  done('getDocsSearchSeries', await sdk.getDocsSearchSeries({ client, query: { granularity: 'day' } }))
  done('eraseDocsSearchSession', await sdk.eraseDocsSearchSession({ client, path: { session_id: 'walk-session' } }))

  // A learner's data: one note, the list, the export, then the note's deletion and the erasure.
  done('getConspectus', await sdk.getConspectus({ client, path: { conspectus_uuid }, query: me }))
  const notes = await sdk.listConspectuses({ client, query: { ...me, limit: 10 } })
  done('listConspectuses', notes)
  if (strict) expect(notes.data?.items.length === 1, 'one note listed')
  done('exportUser', await sdk.exportUser({ client, path: me }))
  done('deleteConspectus', await sdk.deleteConspectus({ client, path: { conspectus_uuid }, query: me }))
  // By identity: read and export the learner, then erase a second one.
  const byId = { client_uuid: created.data!.client_uuid }
  done('getUserByClientUuid', await sdk.getUserByClientUuid({ client, path: byId }))
  done('exportUserByClientUuid', await sdk.exportUserByClientUuid({ client, path: byId }))
  const second = await sdk.createUser({
    client,
    headers: key('user-2'),
    body: { ...owner(`${id}-2`), full_name: 'SDK Walker 2' },
  })
  expect(second.data?.client_uuid, 'second createUser data')
  done(
    'eraseUserByClientUuid',
    await sdk.eraseUserByClientUuid({ client, path: { client_uuid: second.data!.client_uuid } }),
  )
  done('eraseUser', await sdk.eraseUser({ client, path: me }))

  // Partner keys as data: issue (the secret shown once), read, list, roll, revoke, the audit.
  const keyId = `walk-${id}`
  const issued = await sdk.createApiKey({
    client,
    headers: key('api-key'),
    body: { id: keyId, scopes: ['users:read'] },
  })
  done('createApiKey', issued)
  if (strict) expect(issued.data?.secret?.startsWith('ssk_'), 'the new secret')
  done('getApiKey', await sdk.getApiKey({ client, path: { key_id: keyId } }))
  done('listApiKeys', await sdk.listApiKeys({ client, query: { limit: 10 } }))
  done(
    'rollApiKey',
    await sdk.rollApiKey({ client, path: { key_id: keyId }, headers: key('roll'), body: { expires_in_seconds: 0 } }),
  )
  done('revokeApiKey', await sdk.revokeApiKey({ client, path: { key_id: keyId } }))
  done('listAdminAudit', await sdk.listAdminAudit({ client, query: { key_id: keyId } }))
  return r.calls
}

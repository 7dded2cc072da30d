// orval (fetch client, `headers: true`; the base URL is set at generation): every operation once.
import * as api from '../.out/orval/client.js'
import { expect, FAR_FUTURE, owner, Recorder } from './common.js'

export async function walk(_baseUrl: string, apiKey: string, id: string, strict: boolean) {
  const r = new Recorder()
  const me = owner(id)
  const key = (step: string) => ({ 'Idempotency-Key': `${id}-${step}` })
  const auth: RequestInit = { headers: { 'X-API-Key': apiKey } }
  const done = (operationId: string, res: { status: number; headers: Headers }) => r.record(operationId, res)

  done('getLive', await api.getLive(auth))
  done('getReady', await api.getReady(auth))
  done('getOpenApiDocument', await api.getOpenApiDocument(auth))
  // orval's fetch client parses every body as JSON; /metrics is Prometheus text and /arazzo.yaml
  // YAML, so they are read with fetch on the URLs orval builds.
  done('getMetrics', await fetch(api.getGetMetricsUrl(), auth))
  done('getArazzoDocument', await fetch(api.getGetArazzoDocumentUrl(), auth))

  const created = await api.createUser({ ...me, full_name: 'SDK Walker', timezone: 'Europe/Berlin' }, key('user'), auth)
  done('createUser', created)
  expect(created.status === 201 && created.data.client_uuid, 'createUser data')
  const read = await api.getUserBySystemUserId(me.system_uuid, me.system_user_id, undefined, auth)
  done('getUserBySystemUserId', read)
  if (strict)
    expect(
      read.status === 200 && created.status === 201 && read.data.client_uuid === created.data.client_uuid,
      'read the created user',
    )
  done(
    'updateUserBySystemUserId',
    await api.updateUserBySystemUserId(
      me.system_uuid,
      me.system_user_id,
      { full_name: 'SDK Walker', timezone: 'Europe/Berlin' },
      key('put'),
      auth,
    ),
  )
  const patched = await api.patchUserBySystemUserId(
    me.system_uuid,
    me.system_user_id,
    { username: 'walker' },
    key('patch'),
    auth,
  )
  done('patchUserBySystemUserId', patched)
  if (strict) expect(patched.status === 200 && patched.data.username === 'walker', 'patch user')

  const note = await api.createConspectus(
    {
      ...me,
      title: 'Walk',
      cue_sheet: { topic: 'SDKs' },
      dense_paragraph: 'Generated clients keep partners honest.',
      bullets: ['typed'],
    },
    key('note'),
    auth,
  )
  done('createConspectus', note)
  const conspectusUuid = note.status === 201 ? note.data.conspectus_uuid : ''
  const owned = { ...me, as_of: FAR_FUTURE }
  done('listDueConspectuses', await api.listDueConspectuses(owned, undefined, auth))
  done(
    'patchConspectus',
    await api.patchConspectus(conspectusUuid, { ...me, title: 'Walk (edited)' }, key('edit'), auth),
  )
  const reviewed = await api.reviewConspectus(conspectusUuid, { ...me, outcome: 'remembered' }, key('review'), auth)
  done('reviewConspectus', reviewed)
  if (strict) expect(reviewed.status === 200 && reviewed.data.slot === 'B', 'review moves to B')
  done('getScheduleSummary', await api.getScheduleSummary(owned, undefined, auth))

  done(
    'createErrorLog',
    await api.createErrorLog(
      { ...me, message: 'Mixed up slots', conspectus_uuid: conspectusUuid },
      key('mistake'),
      auth,
    ),
  )
  const logs = await api.listErrorLogs({ ...me, limit: 10 }, undefined, auth)
  done('listErrorLogs', logs)
  if (strict)
    expect(logs.status === 200 && logs.data.items.length === 1 && logs.data.next_cursor === null, 'one logged mistake')

  done(
    'ingestDocsSearchEvent',
    await api.ingestDocsSearchEvent(
      { event: 'search_query', emitted_at_ms: Date.now(), query_id: `q-${id}` },
      undefined,
      auth,
    ),
  )
  done(
    'ingestDocsSearchEventBatch',
    await api.ingestDocsSearchEventBatch(
      { events: [{ event: 'search_result_click', emitted_at_ms: Date.now(), query_id: `q-${id}` }] },
      undefined,
      auth,
    ),
  )
  done(
    'getDocsSearchTelemetryMetrics',
    await api.getDocsSearchTelemetryMetrics({ window_minutes: 60 }, undefined, auth),
  )
  done('getDocsSearchTopSearches', await api.getDocsSearchTopSearches({ limit: 5 }, undefined, auth))
  done('getDocsSearchNoResultSearches', await api.getDocsSearchNoResultSearches({ limit: 5 }, undefined, auth))
  done('getDocsSearchNoClickSearches', await api.getDocsSearchNoClickSearches({ limit: 5 }, undefined, auth))
  done('getDocsSearchClickPositions', await api.getDocsSearchClickPositions({}, undefined, auth))
  done('getDocsSearchSeries', await api.getDocsSearchSeries({ granularity: 'day' }, undefined, auth))
  done('eraseDocsSearchSession', await api.eraseDocsSearchSession('walk-session', undefined, auth))

  // A learner's data: one note, the list, the export, then the note's deletion and the erasure.
  done('getConspectus', await api.getConspectus(conspectusUuid, me, undefined, auth))
  const notes = await api.listConspectuses({ ...me, limit: 10 }, undefined, auth)
  done('listConspectuses', notes)
  if (strict) expect(notes.status === 200 && notes.data.items.length === 1, 'one note listed')
  done('exportUser', await api.exportUser(me.system_uuid, me.system_user_id, undefined, auth))
  done('deleteConspectus', await api.deleteConspectus(conspectusUuid, me, undefined, auth))
  // By identity: read and export the learner, then erase a second one.
  const clientUuid = created.status === 201 ? created.data.client_uuid : ''
  done('getUserByClientUuid', await api.getUserByClientUuid(clientUuid, undefined, auth))
  done('exportUserByClientUuid', await api.exportUserByClientUuid(clientUuid, undefined, auth))
  const second = await api.createUser({ ...owner(`${id}-2`), full_name: 'SDK Walker 2' }, key('user-2'), auth)
  expect(second.status === 201 && second.data.client_uuid, 'second createUser data')
  const secondUuid = second.status === 201 ? second.data.client_uuid : ''
  done('eraseUserByClientUuid', await api.eraseUserByClientUuid(secondUuid, undefined, auth))
  done('eraseUser', await api.eraseUser(me.system_uuid, me.system_user_id, undefined, auth))

  // Partner keys as data: issue (the secret shown once), read, list, roll, revoke, the audit.
  const keyId = `walk-${id}`
  const issued = await api.createApiKey({ id: keyId, scopes: ['users:read'] }, key('api-key'), auth)
  done('createApiKey', issued)
  if (strict) expect(issued.status === 201 && issued.data.secret?.startsWith('ssk_'), 'the new secret')
  done('getApiKey', await api.getApiKey(keyId, undefined, auth))
  done('listApiKeys', await api.listApiKeys({ limit: 10 }, undefined, auth))
  done('rollApiKey', await api.rollApiKey(keyId, { expires_in_seconds: 0 }, key('roll'), auth))
  done('revokeApiKey', await api.revokeApiKey(keyId, undefined, auth))
  done('listAdminAudit', await api.listAdminAudit({ key_id: keyId }, undefined, auth))
  return r.calls
}

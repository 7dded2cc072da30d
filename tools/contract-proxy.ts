// `make contract`: the service behind Stoplight Prism in proxy mode with --errors. Every
// operation's success path and documented business errors go through the proxy; any
// `sl-violations` header (a response off the contract) fails the run.
import { spawn } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'
import { createClient } from '../src/db/client.js'
import { migrate } from '../src/db/migrate.js'
import { specPath } from '../src/paths.js'
import { ADMIN_URL, databaseUrl } from '../test/helpers/database.js'

const PRISM = '@stoplight/prism-cli@5.14.2' // newer releases need Node 24
const SERVICE_PORT = Number(process.env.CONTRACT_SERVICE_PORT ?? 3550)
const PROXY_PORT = Number(process.env.CONTRACT_PROXY_PORT ?? 3551)

// Prism's validator does not know the spec's custom `iana-time-zone` format (an annotation
// that our own Ajv enforces); give Prism a copy without it.
const dir = mkdtempSync(path.join(tmpdir(), 'contract-'))
const prismSpec = path.join(dir, 'openapi.yaml')
let prismText = readFileSync(specPath, 'utf8').replace(/\n\s+format: iana-time-zone/g, '')
// CONTRACT_SELF_CHECK=1 makes the contract demand a field the service never sends, to prove
// that Prism reports violations in this set-up (the run must then fail).
const selfCheck = process.env.CONTRACT_SELF_CHECK === '1'
if (selfCheck)
  prismText = prismText.replace(
    'required: [client_uuid, created_at,',
    'required: [zz_never_sent, client_uuid, created_at,',
  )
writeFileSync(prismSpec, prismText)

const name = `contract_${randomBytes(3).toString('hex')}`
const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
await admin.unsafe(`create database "${name}"`)
const sql = createClient(databaseUrl(name))
const app = await buildApp({
  config: loadConfig({ API_KEYS: 'contract', LOG_LEVEL: 'silent', RATE_LIMIT_MAX: '100000' }),
  sql,
  logger: false,
})
const prism = spawn(
  'npx',
  [
    '--yes',
    PRISM,
    'proxy',
    prismSpec,
    `http://127.0.0.1:${SERVICE_PORT}`,
    '--errors',
    '-p',
    String(PROXY_PORT),
    '-h',
    '127.0.0.1',
  ],
  { stdio: ['ignore', 'pipe', 'pipe'] },
)
let prismLog = ''
prism.stdout.on('data', (d) => (prismLog += d))
prism.stderr.on('data', (d) => (prismLog += d))

let failures = 0
let checks = 0
try {
  await migrate(sql)
  await app.listen({ port: SERVICE_PORT, host: '127.0.0.1' })
  const proxy = `http://127.0.0.1:${PROXY_PORT}`
  for (let i = 0; ; i++) {
    try {
      await fetch(`${proxy}/live`)
      break
    } catch {
      if (i > 600) throw new Error(`prism did not start:\n${prismLog}`)
      await sleep(200)
    }
  }

  async function check(label: string, method: string, url: string, body?: unknown, expected?: number) {
    const headers: Record<string, string> = { 'x-api-key': 'contract' }
    if (body !== undefined) headers['content-type'] = 'application/json'
    if (method !== 'GET') headers['idempotency-key'] = randomUUID()
    const res = await fetch(`${proxy}${url}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const text = await res.text()
    checks++
    const violations = res.headers.get('sl-violations')
    const wrongStatus = expected !== undefined && res.status !== expected
    if (violations || wrongStatus) {
      failures++
      console.log(`FAIL ${label}: ${res.status} ${violations ?? ''} ${text.slice(0, 200)}`)
    } else {
      console.log(`ok   ${label}: ${res.status}`)
    }
    return text ? JSON.parse(text) : undefined
  }

  const owner = { system_user_id: 'contract', system_uuid: randomUUID() }
  const userUrl = `/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`
  const ghost = `/api/v1/user/${randomUUID()}/ghost`
  const q = `system_user_id=${owner.system_user_id}&system_uuid=${owner.system_uuid}`
  await check('live', 'GET', '/live', undefined, 200)
  await check('ready', 'GET', '/ready', undefined, 200)
  await check('createUser', 'POST', '/api/v1/user', { ...owner, full_name: 'Contract', timezone: 'Europe/Berlin' }, 201)
  await check('createUser USER_101', 'POST', '/api/v1/user', { ...owner, full_name: 'Again' }, 400)
  await check('getUser', 'GET', userUrl, undefined, 200)
  await check('getUser USER_404', 'GET', ghost, undefined, 404)
  await check('updateUser', 'PUT', userUrl, { full_name: 'Replaced', timezone: 'Europe/Berlin', username: 'c' }, 200)
  await check('updateUser USER_404', 'PUT', ghost, { full_name: 'X', timezone: 'UTC' }, 404)
  await check('patchUser', 'PATCH', userUrl, { username: null }, 200)
  await check('patchUser USER_102', 'PATCH', userUrl, { full_name: null }, 400)
  await check('patchUser USER_404', 'PATCH', ghost, { username: 'x' }, 404)
  const note = await check(
    'createConspectus',
    'POST',
    '/api/v1/conspectuses',
    { ...owner, title: 'T', cue_sheet: { topic: 'C' }, dense_paragraph: 'p', bullets: ['b'] },
    201,
  )
  await check(
    'createConspectus USER_404',
    'POST',
    '/api/v1/conspectuses',
    { system_user_id: 'ghost', system_uuid: randomUUID(), cue_sheet: {}, dense_paragraph: 'p', bullets: [] },
    404,
  )
  const noteUrl = `/api/v1/conspectuses/${note.conspectus_uuid}`
  await check('patchConspectus', 'PATCH', noteUrl, { ...owner, title: null }, 200)
  await check('patchConspectus CONS_102', 'PATCH', noteUrl, { ...owner }, 400)
  await check(
    'patchConspectus CONS_404',
    'PATCH',
    `/api/v1/conspectuses/${randomUUID()}`,
    { ...owner, title: 'x' },
    404,
  )
  await check('reviewConspectus', 'POST', `${noteUrl}/actions/review`, { ...owner, outcome: 'remembered' }, 200)
  await check(
    'reviewConspectus CONS_404',
    'POST',
    `/api/v1/conspectuses/${randomUUID()}/actions/review`,
    { ...owner, outcome: 'forgot' },
    404,
  )
  await check(
    'listDueConspectuses',
    'GET',
    `/api/v1/conspectuses/due?${q}&as_of=2030-01-01T00:00:00Z&limit=10`,
    undefined,
    200,
  )
  await check(
    'listDueConspectuses USER_404',
    'GET',
    `/api/v1/conspectuses/due?system_user_id=ghost&system_uuid=${randomUUID()}`,
    undefined,
    404,
  )
  await check('getScheduleSummary', 'GET', `/api/v1/schedule/summary?${q}`, undefined, 200)
  await check(
    'createErrorLog',
    'POST',
    '/api/v1/errors',
    { ...owner, message: 'm', conspectus_uuid: note.conspectus_uuid, context: { a: 1 } },
    201,
  )
  await check(
    'createErrorLog CONS_404',
    'POST',
    '/api/v1/errors',
    { ...owner, message: 'm', conspectus_uuid: randomUUID() },
    404,
  )
  await check('listErrorLogs', 'GET', `/api/v1/errors?${q}&limit=1`, undefined, 200)
  await check(
    'ingestDocsSearchEvent',
    'POST',
    '/api/v1/telemetry/docs-search',
    { event: 'search_query', emitted_at_ms: Date.now(), query_id: 'q', results_count: 0 },
    202,
  )
  await check(
    'ingestDocsSearchEventBatch',
    'POST',
    '/api/v1/telemetry/docs-search/batch',
    { events: [{ event: 'search_result_click', emitted_at_ms: Date.now(), query_id: 'q', time_to_success_ms: 900 }] },
    202,
  )
  await check(
    'getDocsSearchTelemetryMetrics',
    'GET',
    '/api/v1/telemetry/docs-search/metrics?window_minutes=5',
    undefined,
    200,
  )
  await check('getDocsSearchTopSearches', 'GET', '/api/v1/telemetry/docs-search/analytics/searches', undefined, 200)
  await check(
    'getDocsSearchNoResultSearches',
    'GET',
    '/api/v1/telemetry/docs-search/analytics/searches/no-results',
    undefined,
    200,
  )
  await check(
    'getDocsSearchNoClickSearches',
    'GET',
    '/api/v1/telemetry/docs-search/analytics/searches/no-clicks',
    undefined,
    200,
  )
  await check(
    'getDocsSearchClickPositions',
    'GET',
    '/api/v1/telemetry/docs-search/analytics/clicks/positions',
    undefined,
    200,
  )
  await check('getDocsSearchSeries', 'GET', '/api/v1/telemetry/docs-search/analytics/series', undefined, 200)
  await check('eraseDocsSearchSession', 'DELETE', '/api/v1/telemetry/docs-search/sessions/walk-session', undefined, 200)
  console.log(`\n${checks} checks through Prism, ${failures} violations`)
} finally {
  prism.kill('SIGTERM')
  await app.close()
  await sql.end()
  await admin.unsafe(`drop database if exists "${name}" with (force)`)
  await admin.end()
}
if (selfCheck) {
  console.log(
    failures > 0 ? 'self-check: Prism reported the planted violation' : 'self-check FAILED: no violation reported',
  )
  process.exit(failures > 0 ? 0 : 1)
}
process.exit(failures === 0 ? 0 : 1)

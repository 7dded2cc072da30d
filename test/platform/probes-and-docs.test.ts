// /live, /ready (including a dead database), /metrics, /openapi.json and /docs.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { randomUUID } from 'node:crypto'
import { parse } from 'yaml'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { createClient } from '../../src/db/client.js'
import { specPath } from '../../src/paths.js'
import { buildServedDocument } from '../../src/docs/served-document.js'
import { buildTestApp, API_KEY, NO_LOAD_SHEDDING } from '../helpers/app.js'

t.test('/live reports the deployment profile without touching dependencies', async (t) => {
  const api = await buildTestApp(t, { APP_ENV: 'qa' })
  const res = await api.get('/live')
  t.same(res.json(), { status: 'alive', app_env: 'qa' })
})

t.test('/ready checks the database and reports its latency', async (t) => {
  const api = await buildTestApp(t)
  const res = await api.get('/ready')
  t.equal(res.statusCode, 200)
  t.match(res.json(), { status: 'ready', checks: { database: 'ok' }, db_latency_ms: Number })
})

t.test('with the database unreachable: /ready 503, business routes 503 COMMON_503, /live 200', async (t) => {
  // Port 9 (discard) on loopback: nothing listens, connections are refused at once.
  const sql = createClient('postgres://postgres@127.0.0.1:9/none', { max: 2, connectTimeout: 2 })
  const app = await buildApp({
    config: loadConfig({ API_KEYS: API_KEY, LOG_LEVEL: 'silent', ...NO_LOAD_SHEDDING }),
    sql,
    logger: false,
  })
  t.teardown(async () => {
    await app.close()
    await sql.end({ timeout: 1 })
  })
  const ready = await app.inject({ method: 'GET', url: '/ready' })
  t.equal(ready.statusCode, 503)
  t.same(ready.json(), { status: 'not_ready', checks: { database: 'unavailable' }, db_latency_ms: null })
  const live = await app.inject({ method: 'GET', url: '/live' })
  t.equal(live.statusCode, 200)
  const business = await app.inject({
    method: 'GET',
    url: `/api/v1/user/${randomUUID()}/x`,
    headers: { 'x-api-key': API_KEY },
  })
  t.equal(business.statusCode, 503)
  t.same(business.json(), {
    code: 'COMMON_503',
    key: 'SERVICE_UNAVAILABLE',
    message: 'The service is temporarily unavailable; retry later.',
    source: 'internal',
  })
  t.equal(business.headers['retry-after'], '5')
})

t.test('/metrics exposes request counts and durations by route template, and db timings', async (t) => {
  const api = await buildTestApp(t)
  const systemUuid = randomUUID()
  await api.get(`/api/v1/user/${systemUuid}/metric-user`)
  const text = (await api.get('/metrics')).body
  const template = 'path_template="/api/v1/user/{system_uuid}/{system_user_id}"'
  t.match(text, new RegExp(`http_requests_total\\{method="GET",${escapeRegExp(template)},status="404"\\} 1`))
  t.match(
    text,
    new RegExp(`http_request_duration_seconds_count\\{method="GET",${escapeRegExp(template)},status="404"\\} 1`),
  )
  t.match(text, /db_operation_duration_seconds_count\{operation="SELECT users"\} 1/, 'the lookup, timed by statement')
  t.notMatch(text, systemUuid, 'no concrete path in labels')
})

t.test(
  '/metrics counts unrouted requests under "unmatched", not its own scrapes, and keeps counts across scrapes',
  async (t) => {
    const api = await buildTestApp(t)
    await api.get('/api/v1/no-such-route')
    await api.get('/api/v1/no-such-route')
    const first = (await api.get('/metrics')).body
    const second = (await api.get('/metrics')).body
    for (const text of [first, second]) {
      t.match(text, /http_requests_total\{method="GET",path_template="unmatched",status="404"\} 2/)
      t.match(text, /http_request_duration_seconds_count\{method="GET",path_template="unmatched",status="404"\} 2/)
      t.notMatch(text, /path_template="\/metrics"/, 'scrapes are not counted')
    }
  },
)

t.test("/openapi.json is the YAML contract plus each operation's error codes, and /docs renders it", async (t) => {
  const api = await buildTestApp(t)
  const served = (await api.get('/openapi.json')).json()
  t.same(served, buildServedDocument(parse(readFileSync(specPath, 'utf8'))))
  t.equal(served.openapi, '3.1.0')
  t.equal(served.info.version, '1.5.0')
  const docs = await api.request({ method: 'GET', url: '/docs/', key: null })
  t.equal(docs.statusCode, 200)
  t.match(docs.headers['content-type'], /text\/html/)
})

function escapeRegExp(s: string) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

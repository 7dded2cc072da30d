// Pact, both sides in one run: the partner's consumer tests (test/pact/consumer/) write the pact
// file against Pact's mock server, then Pact's Verifier replays every interaction against the
// real service on PostgreSQL, setting provider states through the contract-test state route
// (CONTRACT_STATES=1, src/plugins/contract-states.ts). Also: that route exists only when asked
// for, and the service refuses to start with it in production.
import t, { type Test } from 'tap'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { Verifier } from '@pact-foundation/pact'
import type { StateHandlers } from '@pact-foundation/pact/src/dsl/verifier/proxy/types.js'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { PROVIDER_STATES_PATH } from '../../src/plugins/app/contract-states.js'
import { createTestDatabase } from '../helpers/database.js'
import { CONSUMER, PROVIDER, writeConsumerPacts } from './consumer/study-web.pact.js'

const KEY = 'pact-verifier-key'
const dir = mkdtempSync(path.join(tmpdir(), 'pacts-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

async function startService(t: Test, env: Record<string, string>) {
  const db = await createTestDatabase(t)
  const config = loadConfig({
    API_KEYS: KEY,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_MAX: '100000',
    LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0',
    ...env,
  })
  const app = await buildApp({ config, sql: db.sql, logger: false })
  t.teardown(() => app.close())
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address() as { port: number }
  return { app, url: `http://127.0.0.1:${address.port}` }
}

t.test('the consumer tests write a pact covering users, conspectuses, the due list and telemetry', async (t) => {
  await writeConsumerPacts(dir)
  const files = readdirSync(dir)
  t.same(files, [`${CONSUMER}-${PROVIDER}.json`])
  const pact = JSON.parse(readFileSync(path.join(dir, files[0]!), 'utf8'))
  const paths = new Set<string>(pact.interactions.map((i: any) => i.request.path))
  for (const p of [
    '/api/v1/user',
    '/api/v1/conspectuses',
    '/api/v1/conspectuses/due',
    '/api/v1/telemetry/docs-search',
    '/api/v1/telemetry/docs-search/batch',
  ]) {
    t.ok(paths.has(p), `an interaction on ${p}`)
  }
  t.ok(pact.interactions.length >= 9, `${pact.interactions.length} interactions`)
})

/** Pact-js hands each provider state to a handler; every handler forwards it to the service's
 * state route, which sets it up and returns the values the pact reads with fromProviderState. */
function stateHandlersVia(url: string): StateHandlers {
  const states = new Set<string>()
  for (const file of readdirSync(dir)) {
    for (const i of JSON.parse(readFileSync(path.join(dir, file), 'utf8')).interactions)
      for (const s of i.providerStates ?? []) states.add(s.name)
  }
  const forward = (state: string, action: 'setup' | 'teardown') => async (params?: unknown) => {
    const res = await fetch(`${url}${PROVIDER_STATES_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ state, params, action }),
    })
    if (!res.ok) throw new Error(`provider state "${state}": ${res.status} ${await res.text()}`)
    return (await res.json()) as Record<string, string>
  }
  return Object.fromEntries(
    [...states].map((state) => [state, { setup: forward(state, 'setup'), teardown: forward(state, 'teardown') }]),
  )
}

t.test('the provider verifies every interaction on PostgreSQL, states set through the state route', async (t) => {
  const { url } = await startService(t, { APP_ENV: 'qa', CONTRACT_STATES: '1' })
  const output = await new Verifier({
    provider: PROVIDER,
    providerBaseUrl: url,
    pactUrls: readdirSync(dir).map((f) => path.join(dir, f)),
    stateHandlers: stateHandlersVia(url),
    // The partner's recorded key is an example: the verification uses a key this service knows.
    customProviderHeaders: [`X-API-Key: ${KEY}`],
    logLevel: 'warn',
  }).verifyProvider()
  t.ok(output !== undefined, 'every interaction verified')
})

t.test('a verification fails when the service breaks the pact', async (t) => {
  // The same pact against a service whose state route sets up nothing: the reads find no user.
  const { url } = await startService(t, { APP_ENV: 'qa', CONTRACT_STATES: '1' })
  const failed = await new Verifier({
    provider: PROVIDER,
    providerBaseUrl: url,
    pactUrls: readdirSync(dir).map((f) => path.join(dir, f)),
    customProviderHeaders: [`X-API-Key: ${KEY}`],
    logLevel: 'error',
  })
    .verifyProvider()
    .then(
      () => false,
      () => true,
    )
  t.ok(failed, 'without its provider states the verification fails')
})

t.test('the state route exists only for contract tests, never in production', async (t) => {
  const { app } = await startService(t, { APP_ENV: 'dev' })
  const res = await app.inject({
    method: 'POST',
    url: PROVIDER_STATES_PATH,
    payload: { state: 'a user exists', params: {} },
  })
  t.equal(res.statusCode, 404, 'absent without CONTRACT_STATES=1')
  t.throws(() => loadConfig({ APP_ENV: 'prod', API_KEYS: KEY, CONTRACT_STATES: '1' }), /refused with APP_ENV=prod/)
  t.doesNotThrow(() => loadConfig({ APP_ENV: 'qa', API_KEYS: KEY, CONTRACT_STATES: '1' }))
})

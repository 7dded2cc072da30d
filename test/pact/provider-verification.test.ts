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
    DATABASE_URL: db.url,
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

/** The verifier's results (pact_ffi's JSON), handed back on success and as the error's message on failure. */
interface VerificationResults {
  errors: { interaction: string; mismatch: { mismatches?: { type: string; expected?: unknown; actual?: unknown }[] } }[]
  interactionResults: { description: string; providerStates: string[]; result: string }[]
}

const pactInteractions = (): { description: string; providerStates?: { name: string }[] }[] =>
  readdirSync(dir).flatMap((f) => JSON.parse(readFileSync(path.join(dir, f), 'utf8')).interactions)

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
  const results = JSON.parse(output) as VerificationResults
  const interactions = pactInteractions()
  t.same(results.errors, [], 'no mismatch')
  t.equal(results.interactionResults.length, interactions.length, `all ${interactions.length} interactions verified`)
  t.same(
    results.interactionResults.map((r) => r.description).sort(),
    interactions.map((i) => i.description).sort(),
    'each interaction of the pact, once',
  )
  t.ok(
    results.interactionResults.every((r) => r.result === 'OK'),
    'each one OK',
  )
})

t.test('a verification fails on exactly the interactions whose provider state the service did not set', async (t) => {
  // The same pact with no state handlers: the interactions that read a user or a conspectus a
  // state would have made find none (404); the ones without a state still pass. A verifier that
  // crashed or never ran rejects with something other than its results, and fails this test.
  const { url } = await startService(t, { APP_ENV: 'qa', CONTRACT_STATES: '1' })
  const rejection = await new Verifier({
    provider: PROVIDER,
    providerBaseUrl: url,
    pactUrls: readdirSync(dir).map((f) => path.join(dir, f)),
    customProviderHeaders: [`X-API-Key: ${KEY}`],
    logLevel: 'error',
  })
    .verifyProvider()
    .then(
      () => undefined,
      (err: Error) => err,
    )
  if (!rejection) return t.fail('the verification passed without its provider states')
  const results = JSON.parse(rejection.message) as VerificationResults
  const interactions = pactInteractions()
  const needState = interactions.filter((i) => (i.providerStates ?? []).length > 0).map((i) => i.description)
  t.ok(
    needState.length > 0 && needState.length < interactions.length,
    'the pact has interactions with and without states',
  )
  t.same(
    results.errors.map((e) => e.interaction.replace(/^.* - /, '')).sort(),
    needState.sort(),
    'the failures are exactly the interactions that need a state',
  )
  for (const e of results.errors)
    t.match(
      e.mismatch.mismatches?.find((m) => m.type === 'StatusMismatch'),
      { actual: 404 },
      `${e.interaction}: the service found nothing (404)`,
    )
  t.equal(results.interactionResults.length, interactions.length, 'every interaction was replayed')
})

t.test('the state route exists only for contract tests, never in production', async (t) => {
  const { app } = await startService(t, { APP_ENV: 'dev' })
  const res = await app.inject({
    method: 'POST',
    url: PROVIDER_STATES_PATH,
    payload: { state: 'a user exists', params: {} },
  })
  t.equal(res.statusCode, 404, 'absent without CONTRACT_STATES=1')
  t.throws(
    () =>
      loadConfig({ APP_ENV: 'prod', API_KEYS: KEY, DATABASE_URL: 'postgres://db.example/study', CONTRACT_STATES: '1' }),
    /refused with APP_ENV=prod/,
  )
  t.doesNotThrow(() =>
    loadConfig({ APP_ENV: 'qa', API_KEYS: KEY, DATABASE_URL: 'postgres://db.example/study', CONTRACT_STATES: '1' }),
  )
})

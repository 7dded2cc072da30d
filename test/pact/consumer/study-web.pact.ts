// Consumer pacts of a partner ("study-web") against the Study Service: users, conspectuses, the
// due list and telemetry, written with Pact's PactV3 DSL and run against its mock server. Each
// test writes its interactions to the pact file in `dir`; the provider verification
// (test/pact/provider-verification.test.ts) replays them against the real service.
import assert from 'node:assert/strict'
import { MatchersV3, PactV3 } from '@pact-foundation/pact'
import { StudyClient, type Owner } from './study-client.js'

const { like, eachLike, integer, uuid, regex, string, fromProviderState, atLeastOneLike } = MatchersV3

export const CONSUMER = 'study-web'
export const PROVIDER = 'study-service'
/** The key the partner's client sends; the verification swaps in a key the service knows. */
const PARTNER_KEY = 'partner-key-0000'
const DATE_TIME = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?(Z|[+-]\\d{2}:\\d{2})$'
const timestamp = (example: string) => regex(DATE_TIME, example)
const json = { 'Content-Type': regex('^application/json(;.*)?$', 'application/json; charset=utf-8') }
const auth = { 'X-API-Key': PARTNER_KEY }

const learner: Owner = { system_uuid: '3f2c2f57-9d55-4a0b-8a3c-1c1f5b2f4e10', system_user_id: 'pact-learner-1' }
/** A new conspectus is due a day after it is created: ask for the ones due by a later date. */
const DUE_BY = '2099-01-01T00:00:00Z'
const newcomer: Owner = { system_uuid: '7a1c0e2b-5d1f-4c8e-9b3a-2f6d4e8c1a90', system_user_id: 'pact-newcomer' }

const userBody = (owner: Owner) => ({
  client_uuid: uuid('1b4e28ba-2fa1-41d2-883f-0016d3cca427'),
  created_at: timestamp('2026-11-25T10:00:00.000Z'),
  updated_at: timestamp('2026-11-25T10:00:00.000Z'),
  is_row_invalid: integer(0),
  invalidation_reason_uuid: null,
  system_user_id: owner.system_user_id,
  system_uuid: owner.system_uuid,
  username: null,
  full_name: string('Ada Lovelace'),
  timezone: string('Europe/London'),
})

const conspectusBody = (owner: Owner) => ({
  conspectus_uuid: uuid('0b8f9a8e-7f6e-4c1d-9d3e-2a1b0c9d8e7f'),
  system_user_id: owner.system_user_id,
  system_uuid: owner.system_uuid,
  title: string('Photosynthesis'),
  cue_sheet: like({ topic: 'Photosynthesis', rows: [] }),
  dense_paragraph: string('Plants turn light, water and CO2 into glucose and oxygen.'),
  bullets: eachLike('Light reactions make ATP'),
  slot: regex('^[A-D]$', 'A'),
  next_review_at: timestamp('2026-11-25T10:00:00.000Z'),
  review_count: integer(0),
  created_at: timestamp('2026-11-25T10:00:00.000Z'),
  updated_at: timestamp('2026-11-25T10:00:00.000Z'),
})

/** Runs every consumer test, writing the pact file into `dir`. */
export async function writeConsumerPacts(dir: string): Promise<void> {
  const pact = () => new PactV3({ consumer: CONSUMER, provider: PROVIDER, dir, logLevel: 'warn' })

  // Users
  await pact()
    .uponReceiving('a request to create a user')
    .withRequest({
      method: 'POST',
      path: '/api/v1/user',
      headers: { ...auth, 'Idempotency-Key': 'pact-create-user-1', 'Content-Type': 'application/json' },
      body: { ...newcomer, full_name: 'Grace Hopper', timezone: 'America/New_York' },
    })
    .willRespondWith({
      status: 201,
      headers: json,
      body: { ...userBody(newcomer), full_name: 'Grace Hopper', timezone: 'America/New_York' },
    })
    .executeTest(async (mock) => {
      const res = await new StudyClient(mock.url, PARTNER_KEY).createUser(
        { ...newcomer, full_name: 'Grace Hopper', timezone: 'America/New_York' },
        'pact-create-user-1',
      )
      assert.equal(res.status, 201)
      assert.equal(res.body.system_user_id, newcomer.system_user_id)
    })

  await pact()
    .given('a user exists', { ...learner })
    .uponReceiving('a request for a user')
    .withRequest({
      method: 'GET',
      path: `/api/v1/user/${learner.system_uuid}/${learner.system_user_id}`,
      headers: auth,
    })
    .willRespondWith({ status: 200, headers: json, body: userBody(learner) })
    .executeTest(async (mock) => {
      const res = await new StudyClient(mock.url, PARTNER_KEY).getUser(learner)
      assert.equal(res.status, 200)
      assert.equal(res.body.system_uuid, learner.system_uuid)
    })

  await pact()
    .given('a user exists', { ...learner })
    .uponReceiving('a request to change a user time zone')
    .withRequest({
      method: 'PATCH',
      path: `/api/v1/user/${learner.system_uuid}/${learner.system_user_id}`,
      headers: { ...auth, 'Idempotency-Key': 'pact-patch-user-1', 'Content-Type': 'application/json' },
      body: { timezone: 'Asia/Tokyo' },
    })
    .willRespondWith({ status: 200, headers: json, body: { ...userBody(learner), timezone: 'Asia/Tokyo' } })
    .executeTest(async (mock) => {
      const res = await new StudyClient(mock.url, PARTNER_KEY).patchUser(
        learner,
        { timezone: 'Asia/Tokyo' },
        'pact-patch-user-1',
      )
      assert.equal(res.body.timezone, 'Asia/Tokyo')
    })

  await pact()
    .uponReceiving('a request for a user that does not exist')
    .withRequest({ method: 'GET', path: '/api/v1/user/9d1e5c3a-0000-4000-8000-000000000000/nobody', headers: auth })
    .willRespondWith({
      status: 404,
      headers: json,
      body: {
        code: string('USER_404'),
        key: string('USER_NOT_FOUND'),
        message: string('No user with this key.'),
        source: 'business',
      },
    })
    .executeTest(async (mock) => {
      const res = await new StudyClient(mock.url, PARTNER_KEY).getUser({
        system_uuid: '9d1e5c3a-0000-4000-8000-000000000000',
        system_user_id: 'nobody',
      })
      assert.equal(res.status, 404)
    })

  // Conspectuses and the due list
  await pact()
    .given('a user exists', { ...learner })
    .uponReceiving('a request to create a conspectus')
    .withRequest({
      method: 'POST',
      path: '/api/v1/conspectuses',
      headers: { ...auth, 'Idempotency-Key': 'pact-create-conspectus-1', 'Content-Type': 'application/json' },
      body: {
        ...learner,
        title: 'Photosynthesis',
        cue_sheet: { topic: 'Photosynthesis', rows: [] },
        dense_paragraph: 'Light to sugar.',
        bullets: ['ATP'],
      },
    })
    .willRespondWith({
      status: 201,
      headers: json,
      body: { ...conspectusBody(learner), slot: 'A', review_count: 0, last_reviewed_at: null },
    })
    .executeTest(async (mock) => {
      const res = await new StudyClient(mock.url, PARTNER_KEY).createConspectus(
        {
          ...learner,
          title: 'Photosynthesis',
          cue_sheet: { topic: 'Photosynthesis', rows: [] },
          dense_paragraph: 'Light to sugar.',
          bullets: ['ATP'],
        },
        'pact-create-conspectus-1',
      )
      assert.equal(res.status, 201)
      assert.equal(res.body.slot, 'A')
    })

  await pact()
    .given('a user has a conspectus', { ...learner })
    .uponReceiving('a review of a conspectus the learner remembered')
    .withRequest({
      method: 'POST',
      // Pact's provider-state expression, filled from the state's answer (not a JS template).
      path: fromProviderState(
        // biome-ignore lint/suspicious/noTemplateCurlyInString: Pact's expression, not a JS template
        '/api/v1/conspectuses/${conspectus_uuid}/actions/review',
        '/api/v1/conspectuses/0b8f9a8e-7f6e-4c1d-9d3e-2a1b0c9d8e7f/actions/review',
      ),
      headers: { ...auth, 'Idempotency-Key': 'pact-review-1', 'Content-Type': 'application/json' },
      body: { ...learner, outcome: 'remembered' },
    })
    .willRespondWith({
      status: 200,
      headers: json,
      body: {
        ...conspectusBody(learner),
        slot: 'B',
        review_count: 1,
        last_reviewed_at: timestamp('2026-11-25T10:00:00.000Z'),
      },
    })
    .executeTest(async (mock) => {
      const res = await new StudyClient(mock.url, PARTNER_KEY).review(
        '0b8f9a8e-7f6e-4c1d-9d3e-2a1b0c9d8e7f',
        learner,
        'remembered',
        'pact-review-1',
      )
      assert.equal(res.body.slot, 'B')
    })

  await pact()
    .given('a user has a conspectus', { ...learner })
    .uponReceiving('a request for the conspectuses due for review by a date')
    .withRequest({
      method: 'GET',
      path: '/api/v1/conspectuses/due',
      query: { system_user_id: learner.system_user_id, system_uuid: learner.system_uuid, as_of: DUE_BY },
      headers: auth,
    })
    .willRespondWith({
      status: 200,
      headers: json,
      body: atLeastOneLike({ ...conspectusBody(learner), last_reviewed_at: null }),
    })
    .executeTest(async (mock) => {
      const res = await new StudyClient(mock.url, PARTNER_KEY).dueList(learner, DUE_BY)
      assert.ok(res.body.length >= 1)
    })

  // Telemetry
  await pact()
    .uponReceiving('one docs-search telemetry event')
    .withRequest({
      method: 'POST',
      path: '/api/v1/telemetry/docs-search',
      headers: { ...auth, 'Content-Type': 'application/json' },
      body: {
        event: 'search_query',
        emitted_at_ms: 1795400000000,
        session_id: 's-1',
        query_id: 'q-1',
        query_text: 'leitner',
        query_len: 7,
      },
    })
    .willRespondWith({ status: 202, headers: json, body: { accepted: 1 } })
    .executeTest(async (mock) => {
      const res = await new StudyClient(mock.url, PARTNER_KEY).ingest({
        event: 'search_query',
        emitted_at_ms: 1795400000000,
        session_id: 's-1',
        query_id: 'q-1',
        query_text: 'leitner',
        query_len: 7,
      })
      assert.equal(res.status, 202)
    })

  await pact()
    .uponReceiving('a batch of docs-search telemetry events')
    .withRequest({
      method: 'POST',
      path: '/api/v1/telemetry/docs-search/batch',
      headers: { ...auth, 'Content-Type': 'application/json' },
      body: {
        events: [
          { event: 'search_query', emitted_at_ms: 1795400000000, query_id: 'q-2' },
          { event: 'result_click', emitted_at_ms: 1795400001000, query_id: 'q-2', result_rank: 1 },
        ],
      },
    })
    .willRespondWith({ status: 202, headers: json, body: { accepted: 2 } })
    .executeTest(async (mock) => {
      const res = await new StudyClient(mock.url, PARTNER_KEY).ingestBatch([
        { event: 'search_query', emitted_at_ms: 1795400000000, query_id: 'q-2' },
        { event: 'result_click', emitted_at_ms: 1795400001000, query_id: 'q-2', result_rank: 1 },
      ])
      assert.equal(res.body.accepted, 2)
    })
}

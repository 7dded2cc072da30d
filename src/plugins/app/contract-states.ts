// Pact provider states (POST /_contract/provider-states), registered only when the service is
// started for contract tests (CONTRACT_STATES=1 with APP_ENV dev or qa; src/config.ts refuses
// it in prod). Each state is built through the service's own operations with a full-access key,
// so the data is exactly what a partner's calls would have produced. Not part of the contract.
import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { randomUUID } from 'node:crypto'

export const PROVIDER_STATES_PATH = '/_contract/provider-states'

type Params = Record<string, unknown>
type Owner = { system_uuid: string; system_user_id: string }

/** A state that cannot be set up as asked: answered 400 with what was wrong, never 500. */
class StateRefused extends Error {}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

async function call(fastify: FastifyInstance, key: string, method: 'POST', url: string, payload: unknown) {
  const res = await fastify.inject({
    method,
    url,
    payload: payload as object,
    headers: { 'x-api-key': key, 'idempotency-key': randomUUID() },
  })
  // 400 USER_101: the user is already there (a state set up twice), which is the state asked for.
  if (res.statusCode >= 300 && !(res.statusCode === 400 && res.json().code === 'USER_101')) {
    const answer = `provider state: ${method} ${url} answered ${res.statusCode}`
    if (res.statusCode < 500) throw new StateRefused(answer)
    throw new Error(answer)
  }
  return res.json()
}

function ownerOf(params: Params): Owner {
  const { system_uuid, system_user_id } = params
  if (typeof system_uuid !== 'string' || !UUID.test(system_uuid))
    throw new StateRefused('params.system_uuid must be a UUID')
  if (typeof system_user_id !== 'string' || system_user_id.length === 0)
    throw new StateRefused('params.system_user_id must be a non-empty string')
  return { system_uuid, system_user_id }
}

type SetUp = (fastify: FastifyInstance, key: string, params: Params) => Promise<Params>

/** Each state sets up its data and returns the values a consumer reads with fromProviderState. */
const STATES: Record<string, SetUp> = {
  async 'a user exists'(fastify, key, params) {
    const owner = ownerOf(params)
    await call(fastify, key, 'POST', '/api/v1/user', { ...owner, full_name: 'Ada Lovelace', timezone: 'Europe/London' })
    return { ...owner }
  },
  async 'a user has a conspectus'(fastify, key, params) {
    const owner = ownerOf(params)
    await STATES['a user exists']!(fastify, key, params)
    const conspectus = await call(fastify, key, 'POST', '/api/v1/conspectuses', {
      ...owner,
      title: 'Photosynthesis',
      cue_sheet: { topic: 'Photosynthesis', rows: [] },
      dense_paragraph: 'Plants turn light, water and CO2 into glucose and oxygen.',
      bullets: ['Light reactions make ATP'],
    })
    return { ...owner, conspectus_uuid: conspectus.conspectus_uuid }
  },
}

export default fp(
  async (fastify) => {
    if (!fastify.config.contractStates) return
    const key = fastify.config.apiKeys[0]!
    fastify.post(PROVIDER_STATES_PATH, { config: { rateLimit: false } }, async (request, reply) => {
      const body = request.body
      if (body === null || typeof body !== 'object' || Array.isArray(body))
        return reply.code(400).send({ error: 'the body must be a JSON object {state, params, action}' })
      const { state, params = {}, action = 'setup' } = body as { state?: unknown; params?: unknown; action?: unknown }
      if (action !== 'setup' && action !== 'teardown')
        return reply.code(400).send({ error: 'action must be "setup" or "teardown"' })
      if (action === 'teardown') return reply.code(200).send({})
      // Own properties only: "constructor" or "__proto__" name no state.
      const setUp = typeof state === 'string' && Object.hasOwn(STATES, state) ? STATES[state] : undefined
      if (!setUp)
        return reply
          .code(400)
          .send({ error: `unknown provider state "${String(state).slice(0, 100)}"`, known: Object.keys(STATES) })
      if (params === null || typeof params !== 'object' || Array.isArray(params))
        return reply.code(400).send({ error: 'params must be an object' })
      try {
        return reply.code(200).send(await setUp(fastify, key, params as Params))
      } catch (err) {
        if (err instanceof StateRefused) return reply.code(400).send({ error: err.message })
        throw err
      }
    })
    fastify.log.warn({ path: PROVIDER_STATES_PATH }, 'contract-test provider states are on (CONTRACT_STATES=1)')
  },
  { name: 'contract-states', dependencies: ['routes'] },
)

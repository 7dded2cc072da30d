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

async function call(fastify: FastifyInstance, key: string, method: 'POST', url: string, payload: unknown) {
  const res = await fastify.inject({
    method,
    url,
    payload: payload as object,
    headers: { 'x-api-key': key, 'idempotency-key': randomUUID() },
  })
  // 400 USER_101: the user is already there (a state set up twice), which is the state asked for.
  if (res.statusCode >= 300 && !(res.statusCode === 400 && res.json().code === 'USER_101')) {
    throw new Error(`provider state: ${method} ${url} answered ${res.statusCode}`)
  }
  return res.json()
}

function ownerOf(params: Params): Owner {
  const { system_uuid, system_user_id } = params
  if (typeof system_uuid !== 'string' || typeof system_user_id !== 'string')
    throw new Error('provider state needs system_uuid and system_user_id')
  return { system_uuid, system_user_id }
}

/** Each state sets up its data and returns the values a consumer reads with fromProviderState. */
const STATES: Record<string, (fastify: FastifyInstance, key: string, params: Params) => Promise<Params>> = {
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
      const {
        state,
        params = {},
        action = 'setup',
      } = (request.body ?? {}) as { state?: string; params?: Params; action?: string }
      if (action === 'teardown') return reply.code(200).send({})
      const setUp = state ? STATES[state] : undefined
      if (!setUp)
        return reply
          .code(400)
          .send({ error: `unknown provider state "${String(state).slice(0, 100)}"`, known: Object.keys(STATES) })
      return reply.code(200).send(await setUp(fastify, key, params))
    })
    fastify.log.warn({ path: PROVIDER_STATES_PATH }, 'contract-test provider states are on (CONTRACT_STATES=1)')
  },
  { name: 'contract-states', dependencies: ['routes'] },
)

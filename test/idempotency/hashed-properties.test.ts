// Every property of every idempotent write's body is part of its request hash: for each write, a
// body with every property set is stored under a key, then the same key with one property changed
// (one at a time, nested ones too) must be 409 COMMON_409 and change nothing. A hash that dropped a
// property would replay the first answer instead. The table must name every property the contract
// gives the body, so a property added to the spec fails here until it has its row.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { operations } from '../../generated/operations.js'
import { readSpec } from '../../src/spec.js'
import { buildTestApp, newKey, type TestApi } from '../helpers/app.js'
import { conspectusBody, createConspectus, createOwner, type Owner } from '../helpers/fixtures.js'

type Body = Record<string, unknown>
/** The stored key each rollApiKey case rolls. */
const ROLLED_KEY = 'hashed-roll'
type Method = 'post' | 'put' | 'patch'

interface WriteCase {
  /** the body stored first: every property of the schema set */
  body: Body
  /** one changed body per property path (`cue_sheet.rows[0].hint`); each differs from `body` in that place only */
  changes: Record<string, (body: Body) => Body>
}

interface Subject {
  api: TestApi
  owner: Owner
  conspectusUuid: string
}

const set = (key: string, value: unknown) => (body: Body) => ({ ...body, [key]: value })
const cueSheet = (body: Body) => body.cue_sheet as { topic: string; rows: Record<string, string>[] }
const withRow = (key: string, value: string) => (body: Body) => ({
  ...body,
  cue_sheet: { ...cueSheet(body), rows: [{ ...cueSheet(body).rows[0], [key]: value }] },
})

const userProperties = (owner: Owner): WriteCase => ({
  body: {
    full_name: 'Ada Lovelace',
    username: 'ada',
    timezone: 'Europe/London',
    is_row_invalid: 1,
    invalidation_reason_uuid: '00000000-0000-4000-8000-000000000001',
    system_uuid: owner.system_uuid,
  },
  changes: {
    full_name: set('full_name', 'Ada King'),
    username: set('username', 'ada2'),
    timezone: set('timezone', 'Asia/Tokyo'),
    is_row_invalid: set('is_row_invalid', 0),
    invalidation_reason_uuid: set('invalidation_reason_uuid', '00000000-0000-4000-8000-000000000002'),
    system_uuid: set('system_uuid', randomUUID()),
  },
})

const learnerWrite = (owner: Owner) => ({
  system_user_id: set('system_user_id', `${owner.system_user_id}x`),
  system_uuid: set('system_uuid', randomUUID()),
})

const conspectusProperties = (owner: Owner): WriteCase => ({
  body: conspectusBody(owner),
  changes: {
    ...learnerWrite(owner),
    title: set('title', 'Respiration'),
    cue_sheet: set('cue_sheet', { topic: 'Photosynthesis', rows: [] }),
    'cue_sheet.topic': (body) => ({ ...body, cue_sheet: { ...cueSheet(body), topic: 'Light' } }),
    'cue_sheet.rows[0].keywords': withRow('keywords', 'stroma'),
    'cue_sheet.rows[0].question': withRow('question', 'What stores light?'),
    'cue_sheet.rows[0].hint': withRow('hint', 'blue'),
    dense_paragraph: set('dense_paragraph', 'Plants turn light into sugar.'),
    bullets: set('bullets', ['The Calvin cycle fixes CO2', 'Light reactions make ATP']),
  },
})

const cases: Record<string, { method: Method; url: (s: Subject) => string; props: (s: Subject) => WriteCase }> = {
  createUser: {
    method: 'post',
    url: () => '/api/v1/user',
    props: ({ owner }) => {
      const body = {
        system_user_id: `n-${randomUUID().slice(0, 8)}`,
        ...userProperties(owner).body,
        system_uuid: randomUUID(),
      }
      return {
        body,
        changes: { ...userProperties(owner).changes, system_user_id: set('system_user_id', `${body.system_user_id}x`) },
      }
    },
  },
  updateUserBySystemUserId: {
    method: 'put',
    url: ({ owner }) => `/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`,
    props: ({ owner }) => userProperties(owner),
  },
  patchUserBySystemUserId: {
    method: 'patch',
    url: ({ owner }) => `/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`,
    props: ({ owner }) => userProperties(owner),
  },
  createConspectus: {
    method: 'post',
    url: () => '/api/v1/conspectuses',
    props: ({ owner }) => {
      const { body, changes } = conspectusProperties(owner)
      return {
        body: { ...body, schedule_policy: 'fsrs', desired_retention: 0.85 },
        changes: {
          ...changes,
          schedule_policy: set('schedule_policy', 'leitner'),
          desired_retention: set('desired_retention', 0.9),
        },
      }
    },
  },
  patchConspectus: {
    method: 'patch',
    url: ({ conspectusUuid }) => `/api/v1/conspectuses/${conspectusUuid}`,
    props: ({ owner }) => conspectusProperties(owner),
  },
  reviewConspectus: {
    method: 'post',
    url: ({ conspectusUuid }) => `/api/v1/conspectuses/${conspectusUuid}/actions/review`,
    props: ({ owner }) => ({
      body: { ...owner, outcome: 'remembered' },
      changes: { ...learnerWrite(owner), outcome: set('outcome', 'forgot') },
    }),
  },
  createErrorLog: {
    method: 'post',
    url: () => '/api/v1/errors',
    props: ({ owner, conspectusUuid }) => ({
      body: { ...owner, message: 'Mixed up ATP and ADP', conspectus_uuid: conspectusUuid, context: { step: 2 } },
      changes: {
        ...learnerWrite(owner),
        message: set('message', 'Mixed up ATP and NADPH'),
        conspectus_uuid: set('conspectus_uuid', randomUUID()),
        context: set('context', { step: 3 }),
      },
    }),
  },
  createApiKey: {
    method: 'post',
    url: () => '/api/v1/admin/keys',
    props: () => {
      const rateLimit = { max: 10, window_ms: 1000 }
      return {
        body: {
          id: `hashed-${randomUUID().slice(0, 8)}`,
          scopes: ['users:read'],
          systems: ['00000000-0000-4000-8000-000000000001'],
          rate_limit: rateLimit,
          max_concurrent_requests: 5,
          max_body_bytes_in_flight: 2_097_152,
          expires_at: '2030-01-01T00:00:00.000Z',
        },
        changes: {
          id: (body) => ({ ...body, id: `${body.id}x` }),
          scopes: set('scopes', ['users:read', 'study:read']),
          systems: set('systems', ['00000000-0000-4000-8000-000000000002']),
          rate_limit: set('rate_limit', { max: 11, window_ms: 1000 }),
          'rate_limit.window_ms': set('rate_limit', { ...rateLimit, window_ms: 2000 }),
          max_concurrent_requests: set('max_concurrent_requests', 6),
          max_body_bytes_in_flight: set('max_body_bytes_in_flight', 2_097_153),
          expires_at: set('expires_at', '2030-01-02T00:00:00.000Z'),
        },
      }
    },
  },
  rollApiKey: {
    method: 'post',
    url: () => `/api/v1/admin/keys/${ROLLED_KEY}/roll`,
    props: () => ({
      body: { expires_in_seconds: 60 },
      changes: { expires_in_seconds: set('expires_in_seconds', 120) },
    }),
  },
}

const schemas = (readSpec() as { components: { schemas: unknown } }).components.schemas as Record<
  string,
  { properties?: Record<string, unknown> }
>

t.test('the table covers every idempotent write and every property of its body', async (t) => {
  const idempotent = Object.entries(operations)
    .filter(([, op]) => op.idempotent)
    .map(([id]) => id)
  t.same(Object.keys(cases).sort(), idempotent.sort(), 'one row per idempotent operation')
  const owner = { system_user_id: 'o', system_uuid: randomUUID() }
  for (const [id, row] of Object.entries(cases)) {
    const schema = schemas[operations[id as keyof typeof operations].bodySchema!]!
    const props = row.props({ api: undefined as never, owner, conspectusUuid: randomUUID() })
    const topLevel = Object.keys(props.changes).filter((path) => !/[.[]/.test(path))
    t.same(topLevel.sort(), Object.keys(schema.properties ?? {}).sort(), `${id}: a change for every property`)
    t.same(Object.keys(props.body).sort(), Object.keys(schema.properties ?? {}).sort(), `${id}: every property set`)
  }
})

for (const [operationId, row] of Object.entries(cases)) {
  t.test(`${operationId}: the same key with any one hashed property changed is 409`, async (t) => {
    const api = await buildTestApp(t)
    const owner = await createOwner(api)
    const conspectusUuid = (await createConspectus(api, owner)).conspectus_uuid as string
    if (operationId === 'rollApiKey') await api.post('/api/v1/admin/keys', { id: ROLLED_KEY })
    const subject = { api, owner, conspectusUuid }
    const { body, changes } = row.props(subject)
    const url = row.url(subject)
    const key = newKey()
    const first = await api[row.method](url, body, key)
    t.ok(first.statusCode >= 200 && first.statusCode < 300, `the full body is accepted (${first.body.slice(0, 200)})`)
    const replay = await api[row.method](url, body, key)
    t.equal(replay.headers['idempotent-replayed'], 'true', 'the same body replays')
    const records = async () =>
      (await api.db.sql<{ n: number }[]>`select count(*)::int as n from idempotency_records`)[0]!.n
    const before = await records()
    for (const [path, change] of Object.entries(changes)) {
      const changed = change(body)
      t.not(JSON.stringify(changed), JSON.stringify(body), `${path}: the change differs`)
      const res = await api[row.method](url, changed, key)
      t.equal(res.statusCode, 409, `${path} changed: 409`)
      t.equal(res.json().code, 'COMMON_409', `${path} changed: COMMON_409`)
    }
    t.equal(await records(), before, 'no answer stored for a refused body')
    const again = await api[row.method](url, body, key)
    t.equal(again.body, replay.body, 'the stored answer still replays')
  })
}

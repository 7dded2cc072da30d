// A stateful sweep driven by the contract's OpenAPI `links`: create something, then follow
// every link of the answer (read, update, review what was created, and the links of those
// answers in turn), with generated field values. The checks are the hostile sweep's: every
// answer has a status the operation declares, the envelope and a body matching its schema
// (buildTestApp checks each one against the contract), and no 5xx. Seeded like the hostile
// sweep: a fixed seed by default, STATEFUL_SEED=random draws one (printed), STATEFUL_SEED=<n>
// reproduces a run, STATEFUL_RUNS sets the number of chains.
import t from 'tap'
import fc from 'fast-check'
import { randomUUID } from 'node:crypto'
import { buildTestApp, newKey } from '../helpers/app.js'
import { readSpec } from '../../src/spec.js'
import { sweepSeed } from '../helpers/sweep-seed.js'

const seed = sweepSeed('STATEFUL_SEED', 20261128)
const runs = Number(process.env.STATEFUL_RUNS ?? 60)
t.comment(`stateful sweep: seed ${seed} (STATEFUL_SEED=${seed} reproduces it), ${runs} chains`)

const spec = readSpec() as any
const api = await buildTestApp(t)
const deref = (node: any, kind: string) => (node?.$ref ? spec.components[kind][node.$ref.split('/').pop()] : node)

interface Operation {
  id: string
  method: string
  template: string
  params: { name: string; in: string; required: boolean }[]
  idempotent: boolean
  bodySchema: any
  links: Record<string, any>
}
const operations = new Map<string, Operation>()
for (const [template, item] of Object.entries<any>(spec.paths)) {
  for (const method of ['get', 'post', 'put', 'patch', 'delete']) {
    const op = item[method]
    if (!op) continue
    const params = [...(item.parameters ?? []), ...(op.parameters ?? [])].map((p: any) => deref(p, 'parameters'))
    const links: Record<string, any> = {}
    for (const response of Object.values<any>(op.responses)) {
      for (const [name, link] of Object.entries<any>(deref(response, 'responses').links ?? {}))
        links[name] = deref(link, 'links')
    }
    operations.set(op.operationId, {
      id: op.operationId,
      method: method.toUpperCase(),
      template,
      params,
      idempotent: params.some((p: any) => p.name === 'Idempotency-Key'),
      bodySchema: deref(op.requestBody?.content?.['application/json']?.schema, 'schemas') ?? null,
      links,
    })
  }
}

// `$response.body#/a/b`, alone or embedded in a string as `{...}`.
function evaluate(value: unknown, body: any): unknown {
  if (typeof value !== 'string') return value
  const whole = /^\$response\.body#(\/.*)$/.exec(value) ?? /^\{\$response\.body#(\/.*)\}$/.exec(value)
  if (!whole) return value
  return whole[1]!
    .slice(1)
    .split('/')
    .reduce((node: any, key) => node?.[key.replace(/~1/g, '/').replace(/~0/g, '~')], body)
}

t.test('every link names an operation and only parameters it takes', async (t) => {
  let links = 0
  for (const op of operations.values()) {
    for (const [name, link] of Object.entries<any>(op.links)) {
      links++
      const target = operations.get(link.operationId)
      t.ok(target, `${op.id} ${name} -> ${link.operationId}`)
      for (const param of Object.keys(link.parameters ?? {})) {
        t.ok(
          target?.params.some((p) => p.name === param),
          `${op.id} ${name}: ${link.operationId} takes ${param}`,
        )
      }
    }
  }
  t.ok(links >= 10, `${links} links`)
  for (const create of ['createUser', 'createConspectus', 'createErrorLog'])
    t.ok(Object.keys(operations.get(create)!.links).length > 0, `${create} has links`)
})

// Generated values for the fields the sweep varies; the rest comes from the schema's example.
const text = fc.oneof(fc.string({ minLength: 1, maxLength: 40 }), fc.constantFrom('', 'x'.repeat(300), 'Ada', 'ü 😀'))
const variation = fc.record({
  full_name: text,
  username: fc.oneof(fc.constant(null), text),
  timezone: fc.constantFrom('UTC', 'Europe/London', 'America/New_York', 'Mars/Olympus', ''),
  title: fc.oneof(fc.constant(null), text),
  outcome: fc.constantFrom('remembered', 'forgot', 'maybe'),
  message: text,
  dense_paragraph: text,
  is_row_invalid: fc.constantFrom(0, 1, 2),
})
type Variation = typeof variation extends fc.Arbitrary<infer V> ? V : never

interface State {
  owner: { system_user_id: string; system_uuid: string }
  conspectus_uuid?: string
}

function bodyFor(
  op: Operation,
  state: State,
  vary: Variation,
  fromLink: Record<string, unknown> | undefined,
  answer: any,
): unknown {
  const schema = op.bodySchema
  const body: Record<string, unknown> = { ...structuredClone(schema.examples?.[0] ?? {}) }
  for (const [k, v] of Object.entries(fromLink ?? {})) body[k] = evaluate(v, answer)
  for (const [k, v] of Object.entries(vary)) if (k in (schema.properties ?? {}) && k in body) body[k] = v
  if ('system_user_id' in (schema.properties ?? {})) Object.assign(body, state.owner)
  if ('conspectus_uuid' in body) body.conspectus_uuid = state.conspectus_uuid ?? null
  if (op.id === 'createUser')
    Object.assign(body, { system_user_id: `s-${randomUUID().slice(0, 8)}`, system_uuid: randomUUID() })
  return body
}

let requests = 0
const followed = new Set<string>()

async function call(t: any, op: Operation, params: Record<string, unknown>, body: unknown) {
  let url = op.template.replace(/{(\w+)}/g, (_m, name) => encodeURIComponent(String(params[name])))
  const query = op.params.filter((p) => p.in === 'query' && params[p.name] !== undefined && params[p.name] !== null)
  if (query.length > 0)
    url += `?${query.map((p) => `${p.name}=${encodeURIComponent(String(params[p.name]))}`).join('&')}`
  requests++
  // api.request throws on any contract violation: an undeclared status, a body or header off its schema.
  const res = await api.request({
    method: op.method as 'GET',
    url,
    payload: body as never,
    headers: op.idempotent ? { 'idempotency-key': newKey() } : {},
  })
  t.ok(res.statusCode < 500, `${op.method} ${url}: ${res.statusCode}`)
  return res
}

async function follow(t: any, op: Operation, answer: any, state: State, vary: Variation, depth: number): Promise<void> {
  if (depth > 2) return
  for (const [name, link] of Object.entries<any>(op.links)) {
    const target = operations.get(link.operationId)!
    const params = Object.fromEntries(Object.entries(link.parameters ?? {}).map(([k, v]) => [k, evaluate(v, answer)]))
    const body = target.bodySchema ? bodyFor(target, state, vary, link.requestBody, answer) : undefined
    const res = await call(t, target, params, body)
    if (res.statusCode < 300) followed.add(`${op.id} ${name}`)
    if (res.statusCode === 201 && target.id === 'createConspectus') {
      const created = res.json()
      await follow(t, target, created, { ...state, conspectus_uuid: created.conspectus_uuid }, vary, depth + 1)
    }
  }
}

t.test('create, then follow the links: declared answers only, no 5xx', async (t) => {
  await fc.assert(
    fc.asyncProperty(variation, variation, async (createVary, followVary) => {
      const createUser = operations.get('createUser')!
      const user = await call(
        t,
        createUser,
        {},
        bodyFor(createUser, { owner: { system_user_id: '', system_uuid: '' } }, createVary, undefined, null),
      )
      if (user.statusCode !== 201) return
      const created = user.json()
      const state: State = { owner: { system_user_id: created.system_user_id, system_uuid: created.system_uuid } }
      await follow(t, createUser, created, state, followVary, 0)
      // An error-log entry about a conspectus of the same owner, and its links.
      const createConspectus = operations.get('createConspectus')!
      const conspectus = await call(
        t,
        createConspectus,
        {},
        bodyFor(createConspectus, state, followVary, undefined, null),
      )
      if (conspectus.statusCode !== 201) return
      const withConspectus = { ...state, conspectus_uuid: conspectus.json().conspectus_uuid }
      const createErrorLog = operations.get('createErrorLog')!
      const entry = await call(
        t,
        createErrorLog,
        {},
        bodyFor(createErrorLog, withConspectus, followVary, undefined, null),
      )
      if (entry.statusCode === 201) await follow(t, createErrorLog, entry.json(), withConspectus, followVary, 0)
    }),
    { seed, numRuns: runs, endOnFailure: true },
  )
  t.comment(`${requests} requests`)
  // Every link was followed to a success at least once: the links lead somewhere real.
  for (const op of operations.values()) {
    for (const name of Object.keys(op.links))
      t.ok(followed.has(`${op.id} ${name}`), `${op.id} ${name} answered 2xx at least once`)
  }
})

// Property-based conformance: bodies and parameters generated from the spec's own schemas.
// Valid input never gets a 5xx and every answer matches its declared schema (the test helper
// checks each response); invalid input is always a 4xx whose codes are all catalogued.
import t from 'tap'
import fc from 'fast-check'
import { randomUUID } from 'node:crypto'
import { schemas, schemaId } from '../../generated/schemas.js'
import { operations } from '../../generated/operations.js'
import { errorCatalogue } from '../../generated/error-catalogue.js'
import { buildTestApp, newKey } from '../helpers/app.js'
import { createConspectus, createOwner } from '../helpers/fixtures.js'

const SEED = Number(process.env.FC_SEED ?? 20261122)
const RUNS = Number(process.env.FC_RUNS ?? 150)
t.comment(`fast-check seed ${SEED}, ${RUNS} runs per property (FC_SEED / FC_RUNS to change)`)

const api = await buildTestApp(t)
const owner = await createOwner(api, { timezone: 'Europe/Berlin' })
const note = await createConspectus(api, owner)
const KNOWN_KEY = 'conformance-key'
await api.post('/api/v1/admin/keys', { id: KNOWN_KEY })
const catalogued = new Set<string>(errorCatalogue.map((e) => e.code))
let cases = 0

type Schema = Record<string, any>
const byId = new Map<string, Schema>(Object.entries(schemas).map(([name, s]) => [schemaId(name), s as Schema]))
const ZONES = ['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Tokyo', 'Australia/Adelaide']

function arbitrary(schema: Schema): fc.Arbitrary<unknown> {
  if (schema.$ref) return arbitrary(byId.get(schema.$ref)!)
  if (schema.oneOf) return fc.oneof(...schema.oneOf.map(arbitrary))
  if (schema.enum) return fc.constantFrom(...schema.enum)
  if (schema.const !== undefined) return fc.constant(schema.const)
  if (Array.isArray(schema.type)) return fc.oneof(...schema.type.map((type: string) => arbitrary({ ...schema, type })))
  switch (schema.type) {
    case 'null':
      return fc.constant(null)
    case 'boolean':
      return fc.boolean()
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -1000, max: schema.maximum ?? 1_000_000 })
    case 'number':
      return fc.double({ min: schema.minimum ?? 0, max: schema.maximum ?? 1e6, noNaN: true })
    case 'string':
      if (schema.format === 'uuid') return fc.uuid()
      if (schema.format === 'iana-time-zone') return fc.constantFrom(...ZONES)
      if (schema.format === 'date-time')
        return fc
          .date({ min: new Date('2020-01-01'), max: new Date('2030-01-01'), noInvalidDate: true })
          .map((d) => d.toISOString())
      if (schema.pattern)
        return fc
          .stringMatching(new RegExp(schema.pattern))
          .filter((text) => text.length >= (schema.minLength ?? 0) && text.length <= (schema.maxLength ?? 30))
      return fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(schema.maxLength ?? 30, 30) })
    case 'array': {
      const size = { minLength: schema.minItems ?? 0, maxLength: Math.min(schema.maxItems ?? 4, 4) }
      const items = arbitrary(schema.items ?? {})
      return schema.uniqueItems ? fc.uniqueArray(items, size) : fc.array(items, size)
    }
    case 'object': {
      const properties: Record<string, Schema> = schema.properties ?? {}
      if (Object.keys(properties).length === 0)
        return fc.dictionary(
          fc.string({ minLength: 1, maxLength: 6 }),
          fc.oneof(fc.string({ maxLength: 10 }), fc.integer()),
          { maxKeys: 3 },
        )
      const required = new Set<string>(schema.required ?? [])
      return fc.record(Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, arbitrary(v)])), {
        requiredKeys: Object.keys(properties).filter((k) => required.has(k)),
      })
    }
    default:
      return fc.oneof(fc.string(), fc.integer(), fc.constant(null))
  }
}

/** A wrong value for a property of the given schema. */
function wrongValue(schema: Schema): unknown {
  const s = schema.$ref ? byId.get(schema.$ref)! : schema
  const types = ([] as string[]).concat(s.type ?? 'object')
  if (types.includes('string')) return 12345
  if (types.includes('integer') || types.includes('number')) return 'not a number'
  return 'not an object or array'
}

/** Puts the real owner (and note) in place of generated ones most of the time. */
function withKnownOwner(body: Record<string, unknown>, known: boolean) {
  if (!known) return body
  const out = { ...body }
  if ('system_user_id' in out) out.system_user_id = owner.system_user_id
  if ('system_uuid' in out) out.system_uuid = owner.system_uuid
  if (typeof out.conspectus_uuid === 'string') out.conspectus_uuid = note.conspectus_uuid
  return out
}

function urlFor(path: string, known: boolean) {
  return path
    .replace('{system_uuid}', known ? owner.system_uuid : randomUUID())
    .replace('{system_user_id}', known ? owner.system_user_id : 'nobody')
    .replace('{conspectus_uuid}', known ? note.conspectus_uuid : randomUUID())
    .replace('{key_id}', known ? KNOWN_KEY : `no-such-key-${randomUUID()}`)
}

const writeOps = Object.entries(operations).filter(([, op]) => op.bodySchema)
for (const [operationId, op] of writeOps) {
  const bodySchema = (schemas as Record<string, Schema>)[op.bodySchema!]!
  const prefix = errorCatalogue
    .find((e) => 'group' in e && ([] as string[]).concat(e.group as string).includes(op.validationGroup!))!
    .code.split('_')[0]

  t.test(`${operationId}: valid bodies never get a 5xx`, async (t) => {
    await fc.assert(
      fc.asyncProperty(arbitrary(bodySchema), fc.boolean(), async (body, known) => {
        cases++
        const res = await api.request({
          method: op.method as 'POST',
          url: urlFor(op.path, known),
          payload: withKnownOwner(body as Record<string, unknown>, known) as object,
          headers: { 'idempotency-key': newKey() },
        })
        if (res.statusCode >= 500 || res.statusCode === 422)
          throw new Error(`${res.statusCode} ${res.body.slice(0, 300)}`)
      }),
      { seed: SEED, numRuns: RUNS },
    )
    t.pass('no 5xx and no 422 for schema-valid bodies; every answer matched the contract')
  })

  t.test(`${operationId}: invalid bodies are 422 with catalogued ${prefix}_ codes`, async (t) => {
    const props = Object.keys(bodySchema.properties ?? {})
    type Mutation = { kind: 'not-object' | 'unknown' | 'drop' | 'wrong-type'; prop: string }
    const required: string[] = bodySchema.required ?? []
    const mutation = fc.oneof(
      fc.constant<Mutation>({ kind: 'not-object', prop: '' }),
      fc.constant<Mutation>({ kind: 'unknown', prop: 'zz_unknown' }),
      fc.constantFrom(...props).map((prop): Mutation => ({ kind: 'wrong-type', prop })),
      ...(required.length ? [fc.constantFrom(...required).map((prop): Mutation => ({ kind: 'drop', prop }))] : []),
    )
    await fc.assert(
      fc.asyncProperty(arbitrary(bodySchema), mutation, async (valid, m) => {
        cases++
        let body: unknown = { ...(valid as object) }
        const record = body as Record<string, unknown>
        if (m.kind === 'not-object') body = [valid]
        if (m.kind === 'unknown') record[m.prop] = 1
        if (m.kind === 'drop') delete record[m.prop]
        if (m.kind === 'wrong-type') record[m.prop] = wrongValue(bodySchema.properties[m.prop])
        const res = await api.request({
          method: op.method as 'POST',
          url: urlFor(op.path, true),
          payload: body as object,
          headers: { 'idempotency-key': newKey() },
        })
        if (res.statusCode !== 422)
          throw new Error(`${m.kind} ${m.prop}: expected 422, got ${res.statusCode} ${res.body.slice(0, 200)}`)
        for (const item of res.json().errors) {
          if (!catalogued.has(item.code) || !item.code.startsWith(prefix))
            throw new Error(`uncatalogued or foreign code ${item.code}`)
        }
      }),
      { seed: SEED, numRuns: RUNS },
    )
    t.pass('every invalid body answered 422 with catalogued codes')
  })
}

const readOps = Object.entries(operations).filter(([, op]) => op.method === 'GET' && op.path.startsWith('/api/v1'))
t.test('GET routes: arbitrary query strings are 2xx, 404 or 422 with catalogued codes, never 5xx', async (t) => {
  const value = fc.oneof(
    fc.string({ maxLength: 12 }),
    fc.integer({ min: -5, max: 20000 }).map(String),
    fc.uuid(),
    fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
  )
  const names = ['system_user_id', 'system_uuid', 'as_of', 'limit', 'cursor', 'conspectus_uuid', 'window_minutes']
  for (const [operationId, op] of readOps) {
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(fc.constantFrom(...names), value, { maxKeys: 5 }),
        fc.boolean(),
        async (query, known) => {
          cases++
          const params = new URLSearchParams(query as Record<string, string>)
          if (known && params.has('system_user_id')) params.set('system_user_id', owner.system_user_id)
          if (known && params.has('system_uuid')) params.set('system_uuid', owner.system_uuid)
          const res = await api.get(`${urlFor(op.path, known)}?${params}`)
          if (res.statusCode >= 500) throw new Error(`${operationId}: ${res.statusCode} ${res.body}`)
          if (res.statusCode === 422)
            for (const item of res.json().errors)
              if (!catalogued.has(item.code)) throw new Error(`uncatalogued ${item.code}`)
        },
      ),
      { seed: SEED, numRuns: RUNS },
    )
  }
  t.pass(`${readOps.length} GET operations`)
})

t.teardown(() => console.log(`# property cases run: ${cases}`))

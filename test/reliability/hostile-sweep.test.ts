// Generated hostile requests for every operation of spec/openapi.yaml, checked the way
// Schemathesis checks by default: no 5xx, a status the operation declares, a declared content
// type, a body that matches the declared schema, the required headers (X-Request-Id), invalid
// input refused with a 4xx, an undeclared method answered 405 with `Allow`.
// Seeded: a fixed seed by default; HOSTILE_SEED=random draws one (printed), HOSTILE_SEED=<n>
// reproduces a run; HOSTILE_RUNS sets the budget;
// HOSTILE_PROBLEMS_FILE writes every problem found to that file.
import t from 'tap'
import fc from 'fast-check'
import { randomUUID } from 'node:crypto'
import net from 'node:net'
import { writeFileSync } from 'node:fs'
import type { InjectOptions } from 'fastify'
import { API_KEY, buildTestApp, newKey } from '../helpers/app.js'
import { contractProblems, findRoute } from '../helpers/contract.js'
import { createConspectus, createOwner } from '../helpers/fixtures.js'
import { readSpec } from '../../src/spec.js'
import { sweepSeed } from '../helpers/sweep-seed.js'

const seed = sweepSeed('HOSTILE_SEED', 20261128)
const runs = Number(process.env.HOSTILE_RUNS ?? 5000)
t.comment(`hostile sweep: seed ${seed} (HOSTILE_SEED=${seed} reproduces it), ${runs} requests`)

const spec = readSpec() as any
const api = await buildTestApp(t)
const owner = await createOwner(api)
const conspectus = await createConspectus(api, owner)

// ---- What the spec declares -------------------------------------------------------------

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const
const deref = (node: any, kind: string) => (node?.$ref ? spec.components[kind][node.$ref.split('/').pop()] : node)

interface Param {
  name: string
  in: 'path' | 'query' | 'header'
  required: boolean
  schema: any
}
interface Operation {
  method: string
  template: string
  params: Param[]
  body: Record<string, unknown> | null
  bodySchema: any
  secured: boolean
}

const operations: Operation[] = []
for (const [template, item] of Object.entries<any>(spec.paths)) {
  for (const method of METHODS) {
    const op = item[method.toLowerCase()]
    if (!op) continue
    const params = [...(item.parameters ?? []), ...(op.parameters ?? [])].map((p: any) =>
      deref(p, 'parameters'),
    ) as Param[]
    const bodySchema = deref(op.requestBody?.content?.['application/json']?.schema, 'schemas')
    operations.push({
      method,
      template,
      params,
      bodySchema: bodySchema ?? null,
      body: bodySchema ? structuredClone(bodySchema.examples?.[0] ?? {}) : null,
      secured: !(Array.isArray(op.security) && op.security.length === 0),
    })
  }
}
const declaredMethods = (template: string) => METHODS.filter((m) => spec.paths[template][m.toLowerCase()])

/** A value that satisfies a parameter, drawn from the fixtures. */
function validParam(p: Param): string | undefined {
  const known: Record<string, string> = {
    system_uuid: owner.system_uuid,
    system_user_id: owner.system_user_id,
    conspectus_uuid: conspectus.conspectus_uuid,
    'Idempotency-Key': 'placeholder',
  }
  if (known[p.name]) return known[p.name]
  if (!p.required) return undefined
  return String(p.schema?.examples?.[0] ?? p.schema?.default ?? 'x')
}

/** The example body with the fixtures' owner, so that valid requests reach the business layer. */
function validBody(op: Operation): Record<string, unknown> | null {
  if (!op.body) return null
  const body = structuredClone(op.body)
  if ('system_uuid' in (op.bodySchema.properties ?? {}) && op.template !== '/api/v1/user') {
    body.system_uuid = owner.system_uuid
    body.system_user_id = owner.system_user_id
  }
  if ('conspectus_uuid' in body) body.conspectus_uuid = conspectus.conspectus_uuid
  if (op.template === '/api/v1/user') body.system_user_id = `sweep-${randomUUID().slice(0, 8)}`
  return body
}

// ---- Hostile values ------------------------------------------------------------------------

/** Strings no field may hold, whatever its schema (always refused). */
const forbiddenString = fc.constantFrom('\u0000', 'a\u0000b', '\ud800', 'x\udfff', 'pair\ud83d-broken', '\udc00\ud800')
/** Strings that may or may not fit a field (never a 5xx). */
const oddString = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '\u0007bell',
    '\u202eRTL',
    '\ufeffBOM',
    '../../etc/passwd',
    "'; drop table users; --",
    '%00',
    '\\u0000',
    'null',
    '0',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }).filter((s) => !s.includes('\u0000') && !/\p{Cs}/u.test(s)),
  fc.string({ unit: 'grapheme', minLength: 200, maxLength: 3000 }),
)
/** JSON number literals that are never acceptable (not finite in a double, or past 2^53-1). */
const forbiddenNumber = fc.constantFrom(
  '1e400',
  '-1e400',
  '9007199254740993',
  '-9007199254740993',
  '1e300',
  '123456789012345678901234567890',
)
/** Values of the wrong or an odd type (never a 5xx). */
const oddValue = fc.oneof(
  fc.constantFrom(null, true, false, 0, -1, 1.5, -0, 2 ** 31, 253402300800000, [], {}, [null], { a: [1] }, '1'),
  fc.array(fc.integer(), { maxLength: 60 }),
)
/** Query and path values that are not finite integers in range. */
const badQueryNumber = fc.constantFrom(
  'Infinity',
  '-Infinity',
  '1e400',
  'NaN',
  'abc',
  '1.5',
  '',
  '9007199254740993',
  '-1',
  '0x10',
  '1e3',
  '%00',
)
const badDateTime = fc.constantFrom(
  '2016-12-31T23:59:60Z',
  '0000-01-01T00:00:00Z',
  '0001-01-01T00:30:00+01:00',
  '9999-12-31T23:59:59-01:00',
  '10000-01-01T00:00:00Z',
  '2026-02-31T00:00:00Z',
  'yesterday',
)

/** A placeholder value whose JSON is then replaced by raw text (number literals JSON.stringify cannot write). */
const MARKER = '\u0001RAW\u0001'
const withRaw = (value: unknown, raw: string) => JSON.stringify(value).replace(JSON.stringify(MARKER), raw)

/** Percent-encoding that, like an attacker's client, writes a lone surrogate as its 3 bytes (WTF-8). */
function encode(s: string): string {
  let out = ''
  for (const ch of s) {
    const code = ch.charCodeAt(0)
    if (ch.length === 1 && code >= 0xd800 && code <= 0xdfff) {
      out += [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)]
        .map((b) => `%${b.toString(16).toUpperCase()}`)
        .join('')
    } else out += encodeURIComponent(ch)
  }
  return out
}

// ---- Cases -----------------------------------------------------------------------------------

interface Case {
  label: string
  request: InjectOptions
  /** The status class the answer must have: '4xx' when the input is surely invalid. */
  expect: '4xx' | 'any' | 401 | 405 | 415
  /** For an undeclared method: the methods `Allow` must list. */
  allow?: string[]
}

const pathOf = (op: Operation, override: Record<string, string> = {}) =>
  op.template.replace(
    /{(\w+)}/g,
    (_m, name) => override[name] ?? encodeURIComponent(validParam(op.params.find((p) => p.name === name)!)!),
  )

function queryOf(op: Operation, override: Record<string, string> = {}, drop?: string): string {
  const parts: string[] = []
  for (const p of op.params.filter((p) => p.in === 'query')) {
    if (p.name === drop) continue
    if (p.name in override) parts.push(`${p.name}=${override[p.name]}`)
    else {
      const v = validParam(p)
      if (v !== undefined) parts.push(`${p.name}=${encodeURIComponent(v)}`)
    }
  }
  return parts.length ? `?${parts.join('&')}` : ''
}

function headersOf(op: Operation, extra: Record<string, string | undefined> = {}): Record<string, string> {
  const headers: Record<string, string | undefined> = { 'x-api-key': op.secured ? API_KEY : undefined }
  if (op.params.some((p) => p.name === 'Idempotency-Key')) headers['idempotency-key'] = newKey()
  if (op.body) headers['content-type'] = 'application/json'
  Object.assign(headers, extra)
  return Object.fromEntries(Object.entries(headers).filter((e): e is [string, string] => e[1] !== undefined))
}

function request(
  op: Operation,
  parts: {
    path?: string
    query?: string
    headers?: Record<string, string | undefined>
    payload?: string | Buffer
    method?: string
  },
): InjectOptions {
  const body = validBody(op)
  return {
    method: (parts.method ?? op.method) as InjectOptions['method'],
    url: `${parts.path ?? pathOf(op)}${parts.query ?? queryOf(op)}`,
    headers: headersOf(op, parts.headers),
    ...(parts.payload !== undefined ? { payload: parts.payload } : body ? { payload: JSON.stringify(body) } : {}),
  }
}

/** The body fields a mutation can target: top level, or inside the first event of a batch. */
function bodyTargets(op: Operation): string[][] {
  const props = Object.keys(op.bodySchema?.properties ?? {})
  if (op.template.endsWith('/batch')) {
    const event = spec.components.schemas.DocsSearchTelemetryIngestRequest
    return [['events'], ...Object.keys(event.properties).map((k) => ['events', '0', k])]
  }
  return props.map((k) => [k])
}

function setAt(target: Record<string, any>, path: string[], value: unknown) {
  let node = target
  for (const step of path.slice(0, -1)) node = node[step]
  node[path.at(-1)!] = value
}

const caseFor = (op: Operation): fc.Arbitrary<Case> => {
  const arbitraries: fc.Arbitrary<Case>[] = []
  const label = (what: string) => `${op.method} ${op.template}: ${what}`
  const pathParams = op.params.filter((p) => p.in === 'path')
  const queryParams = op.params.filter((p) => p.in === 'query')

  if (pathParams.length > 0) {
    arbitraries.push(
      fc
        .tuple(
          fc.constantFrom(...pathParams),
          fc.oneof(
            forbiddenString.map((s) => ({ s, sure: true })),
            oddString.map((s) => ({ s, sure: false })),
          ),
        )
        .map(([p, { s, sure }]) => ({
          label: label(`path ${p.name}=${JSON.stringify(s.slice(0, 40))}`),
          request: request(op, { path: pathOf(op, { [p.name]: encode(s).replace(/^$/, '%20') }) }),
          expect: sure ? '4xx' : 'any',
        })),
      // 'long': one character more than the parameter's maxLength (100 when it declares none).
      fc
        .tuple(
          fc.constantFrom(...pathParams),
          fc.constantFrom('%', '%zz', '%E0%A4%A', '%ED%A0%80', '%C0%AF', 'long', 'y'.repeat(5000)),
        )
        .map(([p, raw]) => {
          const value = raw === 'long' ? 'x'.repeat((p.schema?.maxLength ?? 100) + 1) : raw
          return {
            label: label(`badly encoded or long path ${p.name}=${value.slice(0, 20)}`),
            request: request(op, { path: pathOf(op, { [p.name]: value }) }),
            expect: '4xx',
          }
        }),
    )
  }
  if (queryParams.length > 0) {
    const numeric = queryParams.filter((p) => p.schema?.type === 'integer')
    const dates = queryParams.filter((p) => p.schema?.format === 'date-time')
    const strings = queryParams.filter((p) => p.schema?.type === 'string')
    if (numeric.length)
      arbitraries.push(
        fc.tuple(fc.constantFrom(...numeric), badQueryNumber).map(([p, v]) => ({
          label: label(`query ${p.name}=${v}`),
          request: request(op, { query: queryOf(op, { [p.name]: v }) }),
          expect: '4xx',
        })),
      )
    if (dates.length)
      arbitraries.push(
        fc.tuple(fc.constantFrom(...dates), badDateTime).map(([p, v]) => ({
          label: label(`query ${p.name}=${v}`),
          request: request(op, { query: queryOf(op, { [p.name]: encodeURIComponent(v) }) }),
          expect: '4xx',
        })),
      )
    if (strings.length)
      arbitraries.push(
        fc
          .tuple(
            fc.constantFrom(...strings),
            fc.oneof(
              forbiddenString.map((s) => ({ s, sure: true })),
              oddString.map((s) => ({ s, sure: false })),
            ),
          )
          .map(([p, { s, sure }]) => ({
            label: label(`query ${p.name}=${JSON.stringify(s.slice(0, 40))}`),
            request: request(op, { query: queryOf(op, { [p.name]: encode(s) }) }),
            expect: sure ? '4xx' : 'any',
          })),
      )
    const required = queryParams.filter((p) => p.required)
    if (required.length)
      arbitraries.push(
        fc.constantFrom(...required).map((p) => ({
          label: label(`query ${p.name} missing`),
          request: request(op, { query: queryOf(op, {}, p.name) }),
          expect: '4xx',
        })),
      )
  }
  if (op.body) {
    const targets = bodyTargets(op)
    const mutate = (path: string[], raw: string) =>
      withRaw(
        (() => {
          const body = validBody(op)!
          if (path[0] === 'events' && path.length > 1) body.events = [{ event: 'search_query', emitted_at_ms: 1 }]
          setAt(body, path, MARKER)
          return body
        })(),
        raw,
      )
    arbitraries.push(
      fc.tuple(fc.constantFrom(...targets), forbiddenString).map(([path, s]) => ({
        label: label(`body ${path.join('.')}=${JSON.stringify(s)}`),
        request: request(op, { payload: mutate(path, JSON.stringify(s)) }),
        expect: '4xx',
      })),
      fc.tuple(fc.constantFrom(...targets), forbiddenNumber).map(([path, n]) => ({
        label: label(`body ${path.join('.')}=${n}`),
        request: request(op, { payload: mutate(path, n) }),
        expect: '4xx',
      })),
      fc.tuple(fc.constantFrom(...targets), fc.oneof(oddValue, oddString)).map(([path, v]) => ({
        label: label(`body ${path.join('.')}=${JSON.stringify(v).slice(0, 40)}`),
        request: request(op, { payload: mutate(path, JSON.stringify(v)) }),
        expect: 'any',
      })),
      fc
        .constantFrom(
          { what: 'truncated JSON', payload: '{"a":' },
          { what: 'not JSON', payload: 'hello' },
          { what: 'an array', payload: '[]' },
          {
            what: 'invalid UTF-8',
            payload: Buffer.concat([Buffer.from('{"x":"'), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}')]),
          },
          { what: 'deep nesting', payload: `${'['.repeat(5000)}${']'.repeat(5000)}` },
          {
            what: 'unknown keys',
            payload: JSON.stringify(Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`k${i}`, i]))),
          },
        )
        .map(({ what, payload }) => ({
          label: label(`body ${what}`),
          request: request(op, { payload }),
          expect: '4xx' as const,
        })),
      fc
        .constantFrom(
          'text/plain',
          'application/json; charset=latin1',
          'application/xml',
          'application/json; charset=utf-16',
        )
        .map((type) => ({
          label: label(`content-type ${type}`),
          request: request(op, { headers: { 'content-type': type } }),
          expect: 415 as const,
        })),
    )
    const idempotencyKey = op.params.find((p) => p.name === 'Idempotency-Key')
    if (idempotencyKey) {
      // A missing key is invalid only where the key is required (optional on a telemetry batch).
      const invalidKeys = [...(idempotencyKey.required ? [undefined] : []), '', 'k'.repeat(129), 'clé']
      arbitraries.push(
        fc.constantFrom(...invalidKeys).map((key) => ({
          label: label(`Idempotency-Key ${JSON.stringify(key)}`),
          request: request(op, { headers: { 'idempotency-key': key } }),
          expect: '4xx' as const,
        })),
      )
    }
  }
  if (op.secured) {
    arbitraries.push(
      fc.constantFrom(undefined, '', 'wrong-key', `${API_KEY} `, API_KEY.toUpperCase()).map((key) => ({
        label: label(`X-API-Key ${JSON.stringify(key)}`),
        request: request(op, { headers: { 'x-api-key': key } }),
        expect: 401 as const,
      })),
    )
  }
  // A method is undeclared for the concrete path only if no other template matches it
  // (PATCH /api/v1/conspectuses/due is PATCH /api/v1/conspectuses/{conspectus_uuid}).
  const undeclared = METHODS.filter((m) => !declaredMethods(op.template).includes(m) && !findRoute(m, pathOf(op)))
  if (undeclared.length) {
    arbitraries.push(
      fc.constantFrom(...undeclared).map((method) => ({
        label: `${method} ${op.template}: undeclared method`,
        request: request(op, { method }),
        expect: 405 as const,
        allow: declaredMethods(op.template),
      })),
    )
  }
  arbitraries.push(fc.constant({ label: label('as declared'), request: request(op, {}), expect: 'any' as const }))
  return fc.oneof(...arbitraries)
}

// ---- The sweep --------------------------------------------------------------------------------

const cases = fc.sample(fc.oneof(...operations.map(caseFor)), { seed, numRuns: runs })
const problems: string[] = []
const statuses = new Map<number, number>()
for (const c of cases) {
  const res = await api.app.inject(c.request)
  statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
  const found: string[] = []
  const method = String(c.request.method)
  const url = String(c.request.url)
  if (res.statusCode >= 500) found.push(`answered ${res.statusCode}`)
  if (res.headers['x-request-id'] === undefined) found.push('no X-Request-Id')
  if (c.expect === '4xx' && (res.statusCode < 400 || res.statusCode >= 500))
    found.push(`invalid input answered ${res.statusCode}`)
  if (typeof c.expect === 'number' && res.statusCode !== c.expect)
    found.push(`expected ${c.expect}, answered ${res.statusCode}`)
  if (c.expect === 405) {
    const allow = String(res.headers.allow ?? '')
    for (const m of c.allow ?? []) if (!allow.split(/,\s*/).includes(m)) found.push(`Allow "${allow}" lacks ${m}`)
  } else if (findRoute(method, url.split('?')[0]!)) {
    found.push(...contractProblems(method, url, res.statusCode, res.headers, res.body))
    const type = String(res.headers['content-type'] ?? '')
    if (res.statusCode !== 204 && !/^(application\/json|application\/yaml|text\/plain|text\/html)/.test(type))
      found.push(`content type "${type}" not declared`)
  } else if (res.statusCode !== 404 && res.statusCode < 400) {
    found.push(`a path outside the spec answered ${res.statusCode}`)
  }
  if (found.length) problems.push(`${c.label} -> ${res.statusCode}: ${found.join('; ')} ${res.body.slice(0, 160)}`)
}

if (process.env.HOSTILE_PROBLEMS_FILE) writeFileSync(process.env.HOSTILE_PROBLEMS_FILE, problems.join('\n'))
t.comment(
  `statuses: ${[...statuses]
    .sort((a, b) => a[0] - b[0])
    .map(([s, n]) => `${s}×${n}`)
    .join(' ')}`,
)
t.ok(cases.length >= 5000 || process.env.HOSTILE_RUNS !== undefined, `${cases.length} generated requests`)
const distinct = [...new Set(problems.map((p) => p.replace(/ -> .*/, '').replace(/=.*/, '')))]
t.same(
  problems.slice(0, 25),
  [],
  `no contract problem (${problems.length} in all, seed ${seed}; kinds: ${distinct.slice(0, 20).join(' | ')})`,
)
t.equal((await api.get('/live')).statusCode, 200, 'the process still answers')

// ---- Over a real socket: what inject cannot send -------------------------------------------------

/** Sends raw bytes and returns the status, headers and body of the first answer (or null if closed silently). */
function rawExchange(
  port: number,
  bytes: string,
): Promise<{ status: number; headers: Record<string, string>; body: string } | null> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes))
    let data = ''
    socket.setEncoding('latin1')
    socket.on('data', (chunk) => (data += chunk))
    socket.on('error', () => {})
    socket.setTimeout(5000, () => socket.destroy())
    socket.on('close', () => {
      const [head = '', ...rest] = data.split('\r\n\r\n')
      const [statusLine, ...lines] = head.split('\r\n')
      const status = Number(statusLine?.split(' ')[1])
      if (!status) return resolve(null)
      const headers = Object.fromEntries(
        lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      )
      resolve({ status, headers, body: rest.join('\r\n\r\n') })
    })
  })
}

t.test('answers from the HTTP layer carry the envelope and X-Request-Id', async (t) => {
  await api.app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = api.app.server.address() as net.AddressInfo
  const cases: [string, string, number, string][] = [
    [
      'header section over the limit',
      `GET /live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\nConnection: close\r\n\r\n`,
      431,
      'COMMON_431',
    ],
    [
      'malformed Content-Length',
      'POST /api/v1/user HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\nConnection: close\r\n\r\n',
      400,
      'COMMON_400',
    ],
    [
      'bad percent-encoding in the path',
      `GET /api/v1/user/%zz/${owner.system_user_id} HTTP/1.1\r\nHost: x\r\nX-API-Key: ${API_KEY}\r\nConnection: close\r\n\r\n`,
      400,
      'COMMON_400',
    ],
  ]
  for (const [what, bytes, status, code] of cases) {
    const res = await rawExchange(port, bytes)
    t.equal(res?.status, status, what)
    t.ok(res?.headers['x-request-id'], `${what}: X-Request-Id`)
    t.match(res?.headers['content-type'] ?? '', /^application\/json/, `${what}: JSON`)
    let body: { code?: string } = {}
    try {
      body = JSON.parse(res?.body ?? '')
    } catch {}
    t.equal(body.code, code, `${what}: envelope`)
    t.notMatch(res?.body ?? '', /%zz/, `${what}: the path is not echoed`)
  }
})

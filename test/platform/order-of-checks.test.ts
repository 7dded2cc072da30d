// One order of checks: the numbered list served in the API description (spec/openapi.yaml, "Order
// of checks", in /docs and /openapi.json) and the README's list are the same lines; and the order
// is read from the app itself: each operation's hooks, as the built app registered them
// (printRoutes with its hooks), named stage by stage, must run in the list's order, with exactly
// the stages the operation's contract gives it. A stage that is not a hook of its own (inside one
// hook, or Fastify's parsing and validation) takes its place from Fastify's lifecycle.
import t from 'tap'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { parse as parseYaml } from 'yaml'
import { projectRoot } from '../../src/paths.js'
import { operations, type OperationInfo } from '../../generated/operations.js'
import { bodyPrescan } from '../../src/validation/body-prescan.js'
import { buildTestApp } from '../helpers/app.js'

const read = (file: string) => readFileSync(path.join(projectRoot, file), 'utf8')
const served = JSON.parse(read('generated/openapi.json')).info.description as string
const specDescription = parseYaml(read('spec/openapi.yaml')).info.description as string

/** The numbered items after `heading` until the first line that is not one. */
function numberedList(text: string, heading: string): string[] {
  const lines = text.split('\n')
  const at = lines.findIndex((l) => l.includes(heading))
  if (at < 0) return []
  const items: string[] = []
  for (const line of lines.slice(at + 1)) {
    if (line.trim() === '' && items.length === 0) continue
    if (!/^\d+\. /.test(line)) break
    items.push(line)
  }
  return items
}

/** (number, first HTTP status or null) of each stage. */
const stages = (items: string[]) =>
  items.map((item) => {
    const [, n, rest] = /^\s*(\d+)\.\s+(.*)$/.exec(item)!
    return [Number(n), /\b([1-5]\d\d)\b/.exec(rest!)?.[1] ?? null]
  })

t.test('the served order of checks is the README one, line for line', async (t) => {
  const fromSpec = numberedList(specDescription, '**Order of checks**')
  t.ok(fromSpec.length >= 10, `the spec lists the stages (${fromSpec.length})`)
  t.same(numberedList(served, '**Order of checks**'), fromSpec, 'served as written in the spec')
  const readme = read('README.md')
  t.same(numberedList(readme, '<!-- order-of-checks'), fromSpec, 'README.md has the same lines')
})

// The stages of the list each named hook carries out, by lifecycle phase. Hooks not named here
// (the request id, tracing, the timer) are not checks of the list; but one that answers nothing
// must run before them all: the key's identification (src/plugins/app/auth.ts), which the rate
// limiter's client, the key check and the scope read.
const IDENTIFY = 'identifyKey'
const HOOK_STAGES: Record<string, Record<string, number[]>> = {
  onRequest: {
    limitHook: [1],
    limitConcurrency: [2],
    shedLoad: [3],
    requireApiKey: [4],
    checkScope: [5],
    // content encoding, the client's body bytes, the process's body budget: one hook, in that order
    reserveBody: [6, 7, 8],
  },
  preParsing: { prescanBody: [13] },
  preValidation: {},
  // An optional key (a telemetry batch) is checked at the same stage when it is sent.
  preHandler: { checkKeySystems: [15], requireIdempotencyKey: [16], checkOptionalIdempotencyKey: [16] },
}
// Fastify's own steps between those phases: media type, upload rate, size and charset while it
// reads the body (the parser); the schemas (validation); the handler.
const PARSING = [9, 10, 11, 12]
const VALIDATION = [14]

/** Each route's hook names by phase, from printRoutes({ includeHooks }): "METHOD /url" -> phase -> names. */
function routeHooks(printed: string): Map<string, Record<string, string[]>> {
  const routes = new Map<string, Record<string, string[]>>()
  const labels: string[] = []
  let current: Record<string, string[]> | null = null
  for (const line of printed.split('\n')) {
    const m = /^((?:│ {3}| {4})*)(├── |└── )?(.*)$/.exec(line)
    if (!m || m[3] === '') continue
    const depth = m[1]!.length / 4
    const text = m[3]!
    const hooks = /^• \((\w+)\) (\[.*\])$/.exec(text)
    if (hooks) {
      if (current) current[hooks[1]!] = (JSON.parse(hooks[2]!) as string[]).map((name) => name.replace(/\(\)$/, ''))
      continue
    }
    const node = /^(.*?) \(([A-Z, ]+)\)$/.exec(text)
    if (!node) continue
    // A marked line is a path at its depth; an unmarked one another method of the path above it.
    const at = m[2] ? depth : depth - 1
    if (m[2]) labels[at] = node[1]!
    labels.length = at + 1
    const url = labels.join('')
    current = {}
    for (const method of node[2]!.split(', ')) routes.set(`${method} ${url}`, current)
  }
  return routes
}

/** The stages a route's hooks carry out, in the order they run. */
function stagesRun(hooks: Record<string, string[]>, op: OperationInfo): number[] {
  const of = (phase: string) => (hooks[phase] ?? []).flatMap((name) => HOOK_STAGES[phase]![name] ?? [])
  return [
    ...of('onRequest'),
    // A preParsing hook wraps the body's stream: its check runs on the text as the parser reads
    // it, after the parser's own (media type, size and charset are known from the headers).
    ...(op.bodySchema !== null ? PARSING : []),
    ...of('preParsing'),
    ...of('preValidation'),
    ...VALIDATION,
    ...of('preHandler'),
  ]
}

/** The stages the list gives an operation, from its contract (generated/operations.ts). */
function stagesDue(op: OperationInfo): number[] {
  const isProtected = !op.public
  const body = op.bodySchema !== null
  return [
    ...(isProtected ? [1, 2, 3, 4, 5] : []),
    ...(isProtected && body ? [6, 7, 8] : []),
    ...(body ? PARSING : []),
    ...(bodyPrescan(op.method, op.url) ? [13] : []),
    ...VALIDATION,
    ...(isProtected && op.systemUuidIn.length > 0 ? [15] : []),
    ...(op.idempotent || op.idempotencyKeyOptional ? [16] : []),
  ]
}

t.test("each operation's registered hooks run the listed stages in the list's order", async (t) => {
  const listed = stages(numberedList(specDescription, '**Order of checks**')).map(([n]) => n)
  t.same(
    listed,
    Array.from({ length: 18 }, (_, i) => i + 1),
    'the list numbers its 18 stages in order',
  )
  const api = await buildTestApp(t)
  await api.app.ready()
  const routes = routeHooks(api.app.printRoutes({ includeHooks: true, commonPrefix: false }))
  const served = Object.entries(operations as Record<string, OperationInfo>).filter(([, op]) => op.served)
  t.ok(served.length >= 20, `${served.length} operations`)
  const unknown = new Set<string>()
  for (const [id, op] of served) {
    const hooks = routes.get(`${op.method} ${op.url}`)
    if (!hooks) {
      t.fail(`${id}: no route ${op.method} ${op.url}`)
      continue
    }
    for (const [phase, names] of Object.entries(hooks))
      for (const name of names)
        if (HOOK_STAGES[phase] && !HOOK_STAGES[phase][name] && name !== IDENTIFY) unknown.add(`${phase} ${name}`)
    const onRequest = hooks.onRequest ?? []
    const identified = onRequest.indexOf(IDENTIFY)
    const firstCheck = onRequest.findIndex((name) => HOOK_STAGES.onRequest![name] !== undefined)
    t.ok(
      identified >= 0 && (firstCheck < 0 || identified < firstCheck),
      `${id}: its key is identified (${IDENTIFY}) before its first check`,
    )
    const run = stagesRun(hooks, op)
    t.same(run, stagesDue(op), `${id} (${op.method} ${op.url}): its stages, in order`)
  }
  // The fullest operation runs every check up to the handler's, in the listed order.
  const fullest = served
    .map(([, op]) => stagesRun(routes.get(`${op.method} ${op.url}`)!, op))
    .sort((a, b) => b.length - a.length)[0]!
  t.same(fullest, listed.slice(0, 16), 'one operation runs stages 1 to 16, in order (17 and 18 are its handler)')
  // Every hook of a checking phase is known: a new check is a named hook in HOOK_STAGES (and a stage in the list).
  t.same(
    [...unknown].filter((hook) => !/ (anonymous|onRequest)$/.test(hook)),
    [],
    'no named hook outside the list',
  )
})

// The body pre-scan against an independent reading: JSON.parse, and the caps read here from the
// contract (spec/openapi.yaml: `x-max-json-bytes` at any depth, `maxItems` of a top-level array).
// Over generated bodies (capped values built to land a few characters either side of their cap,
// strings full of quotes, backslashes and brackets, whitespace or none) cut into random chunks,
// the scan refuses a body exactly when a capped value's structural characters (what the scan
// promises to count as the text arrives) pass its cap, or a capped array holds an item past its
// cap; what it names is over its cap as JSON.parse and JSON.stringify see it; it never refuses a
// body the caps accept; and any chunking, or any prefix, gives the same verdict or none yet.
// Seeded: a fixed seed by default, PRESCAN_SEED=random draws one (printed), PRESCAN_SEED=<n>
// replays one; PRESCAN_RUNS sets the number of bodies.
import t from 'tap'
import fc from 'fast-check'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { parse as parseYaml } from 'yaml'
import { projectRoot } from '../../src/paths.js'
import { operations, type OperationInfo } from '../../generated/operations.js'
import { bodyPrescan } from '../../src/validation/body-prescan.js'
import { sweepSeed } from '../helpers/sweep-seed.js'

const seed = sweepSeed('PRESCAN_SEED', 20261207)
const runs = Number(process.env.PRESCAN_RUNS ?? 150)
t.comment(`body pre-scan differential: seed ${seed} (PRESCAN_SEED=${seed} reproduces it), ${runs} bodies`)

// ---- The contract's caps, read from the spec itself -------------------------------------------

interface Node {
  $ref?: string
  type?: string | string[]
  properties?: Record<string, Node>
  items?: Node
  maxItems?: number
  'x-max-json-bytes'?: number
}
const spec = parseYaml(readFileSync(path.join(projectRoot, 'spec/openapi.yaml'), 'utf8'))
const components = spec.components.schemas as Record<string, Node>
const deref = (node: Node): Node => (node.$ref ? deref(components[node.$ref.split('/').pop()!]!) : node)
const isArray = (node: Node) => [node.type].flat().includes('array')

/** A cap on the values at `path` (property names, `*` for every item of an array). */
interface Cap {
  path: string[]
  keyword: 'x-max-json-bytes' | 'maxItems'
  limit: number
  array: boolean
}

function capsOf(schemaName: string): Cap[] {
  const caps: Cap[] = []
  const walk = (node: Node, at: string[], seen: Set<Node>) => {
    const n = deref(node)
    if (seen.has(n)) return
    const inner = new Set(seen).add(n)
    if (at.length > 0 && typeof n['x-max-json-bytes'] === 'number')
      caps.push({ path: at, keyword: 'x-max-json-bytes', limit: n['x-max-json-bytes'], array: isArray(n) })
    if (at.length === 1 && typeof n.maxItems === 'number')
      caps.push({ path: at, keyword: 'maxItems', limit: n.maxItems, array: true })
    for (const [name, child] of Object.entries(n.properties ?? {})) walk(child, [...at, name], inner)
    if (n.items) walk(n.items, [...at, '*'], inner)
  }
  walk(components[schemaName]!, [], new Set())
  return caps
}

const routes = Object.values(operations as Record<string, OperationInfo>)
  .filter((op) => op.bodySchema !== null && capsOf(op.bodySchema).length > 0)
  .map((op) => ({ method: op.method, url: op.url, caps: capsOf(op.bodySchema!) }))

// ---- The reference: what JSON.parse gives, measured ---------------------------------------------

/** The characters of a value's compact JSON the scan counts: `{ } [ ] , :` and two quotes per string. */
function structural(value: unknown): number {
  if (typeof value === 'string') return 2
  if (value === null || typeof value !== 'object') return 0
  const entries = Array.isArray(value) ? value.map((v) => [null, v] as const) : Object.entries(value)
  let n = 2 + Math.max(0, entries.length - 1)
  for (const [key, v] of entries) n += (key === null ? 0 : 3) + structural(v)
  return n
}

const escapeStep = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1')

/** Every value at `path` under `value`, with its JSON pointer. */
function valuesAt(value: unknown, steps: string[], pointer = ''): { pointer: string; value: unknown }[] {
  if (steps.length === 0) return [{ pointer, value }]
  const [step, ...rest] = steps
  if (step === '*')
    return Array.isArray(value) ? value.flatMap((item, i) => valuesAt(item, rest, `${pointer}/${i}`)) : []
  if (value === null || typeof value !== 'object' || Array.isArray(value) || !Object.hasOwn(value, step!)) return []
  return valuesAt((value as Record<string, unknown>)[step!], rest, `${pointer}/${escapeStep(step!)}`)
}

/** The capped values past their caps, as `keyword pointer`: all of them, and those the scan must see. */
function overCaps(body: unknown, caps: Cap[]) {
  const over = new Map<string, unknown>()
  const seen = new Set<string>()
  for (const cap of caps)
    for (const { pointer, value } of valuesAt(body, cap.path)) {
      const id = `${cap.keyword} ${pointer}`
      if (cap.keyword === 'maxItems') {
        if (Array.isArray(value) && value.length > cap.limit) {
          over.set(id, value)
          seen.add(id)
        }
      } else if (value !== null && typeof value === 'object') {
        if (Buffer.byteLength(JSON.stringify(value)) > cap.limit) over.set(id, value)
        if (structural(value) > cap.limit) seen.add(id)
      }
    }
  return { over, seen }
}

// ---- Generated bodies --------------------------------------------------------------------------

const tricky = fc.string({
  unit: fc.constantFrom('a', 'z', ' ', '"', '\\', '{', '}', '[', ']', ',', ':', '/', 'é', '✓', '😀', '\n', '\u0000'),
  maxLength: 12,
})
const scalar = fc.oneof(
  tricky,
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
)
const { small } = fc.letrec((tie) => ({
  small: fc.oneof({ depthSize: 'small', withCrossShrink: true }, scalar, tie('array'), tie('object')),
  array: fc.array(tie('small'), { maxLength: 4 }),
  object: fc.dictionary(tricky, tie('small'), { maxKeys: 4 }),
}))

/** `[0,0,...]`: `items` zeros count `2 + items - 1` (at least 2) structural characters. */
const zeros = (items: number) => new Array<number>(items).fill(0)

/**
 * A value of the capped kind whose structural count lands at `target` when it can (the pad is an
 * array of zeros, one character per zero), at a random place among random members or items.
 */
function padded(base: unknown, array: boolean, target: number, at: number): unknown {
  const counted = structural(base)
  const entries = array ? [...(base as unknown[])] : Object.entries(base as Record<string, unknown>)
  // Adding the pad: a comma if there were entries, its brackets, and for a member its key and colon.
  const fixed = (entries.length > 0 ? 1 : 0) + 2 + (array ? 0 : 3)
  const room = target - counted - fixed
  if (room < 0) return base
  const pad = zeros(room + 1)
  const where = at % (entries.length + 1)
  if (array) return [...entries.slice(0, where), pad, ...entries.slice(where)]
  let key = 'pad'
  while (Object.hasOwn(base as object, key)) key += '_'
  const members = entries as [string, unknown][]
  return Object.fromEntries([...members.slice(0, where), [key, pad], ...members.slice(where)])
}

/** A capped value (or an array under a maxItems cap) near its cap; `near` draws how near. */
function cappedValue(cap: Cap) {
  if (cap.keyword === 'maxItems')
    return fc
      .tuple(fc.constantFrom(0, 1, cap.limit - 1, cap.limit, cap.limit + 1, cap.limit + 2), small)
      .map(([length, item]) => new Array<unknown>(length).fill(item))
  const near = fc.oneof(
    fc.integer({ min: -3, max: 3 }),
    fc.integer({ min: -cap.limit, max: -4 }),
    fc.integer({ min: 4, max: 200 }),
  )
  const base = cap.array ? fc.array(small, { maxLength: 6 }) : fc.dictionary(tricky, small, { maxKeys: 6 })
  return fc.tuple(base, near, fc.nat()).map(([b, delta, at]) => padded(b, cap.array, cap.limit + delta, at))
}

/**
 * Puts `value` at `steps` under `container`, making what is missing: a `*` step puts it in an
 * item of the array there (a new one, or the one at `slot` of those it already has).
 */
function place(container: Record<string, unknown>, steps: string[], value: unknown, slot: number) {
  const [name, next, ...rest] = steps as [string, ...string[]]
  if (next === undefined) {
    container[name] = value
    return
  }
  if (next === '*') {
    if (!Array.isArray(container[name])) container[name] = []
    const list = container[name] as unknown[]
    const at = list.length === 0 ? 0 : slot % (list.length + 1)
    if (rest.length === 0) list[at] = value
    else {
      const item = {}
      list[at] = item
      place(item, rest, value, slot)
    }
    return
  }
  const child = container[name]
  if (child === null || typeof child !== 'object' || Array.isArray(child)) container[name] = {}
  place(container[name] as Record<string, unknown>, [next, ...rest], value, slot)
}

/** A body for a route: the capped places filled near their caps, among other members. */
function body(caps: Cap[]) {
  return fc
    .tuple(
      fc.tuple(...caps.map(cappedValue)),
      fc.dictionary(tricky, small, { maxKeys: 3 }),
      fc.array(fc.nat(), { minLength: caps.length, maxLength: caps.length }),
    )
    .map(([values, extra, slots]) => {
      const root: Record<string, unknown> = { ...extra }
      for (const [i, cap] of caps.entries()) place(root, cap.path, values[i], slots[i]!)
      return root
    })
}

const cases = fc.oneof(
  ...routes.map((route) =>
    fc.record({
      route: fc.constant(route),
      value: body(route.caps),
      indent: fc.constantFrom(0, 0, 1, '\t'),
      chunks: fc.array(fc.integer({ min: 1, max: 4096 }), { minLength: 1, maxLength: 64 }),
      cut: fc.double({ min: 0, max: 1, noNaN: true }),
    }),
  ),
)

/** The scan's verdict on `text` fed in chunks of the given sizes (cycled), and whether it read it all. */
function scanned(route: { method: string; url: string }, text: string, sizes: number[]) {
  const scan = bodyPrescan(route.method, route.url)!
  let verdict = null
  for (let at = 0, i = 0; at < text.length && !verdict; i++) {
    const size = sizes[i % sizes.length]!
    verdict = scan.feed(text.slice(at, at + size))
    at += size
  }
  return { verdict, complete: scan.complete }
}

t.test('the routes with capped values are known to the scan and to the contract alike', async (t) => {
  t.ok(routes.length >= 4, `${routes.length} routes: ${routes.map((r) => `${r.method} ${r.url}`).join(', ')}`)
  for (const route of routes) t.ok(bodyPrescan(route.method, route.url), `${route.method} ${route.url} has a scan`)
})

t.test('the scan agrees with JSON.parse and the caps over generated bodies and chunkings', async (t) => {
  const tally = { refused: 0, accepted: 0, atTheCap: 0 }
  fc.assert(
    fc.property(cases, ({ route, value, indent, chunks, cut }) => {
      const text = JSON.stringify(value, null, indent)
      const { over, seen } = overCaps(JSON.parse(text), route.caps)
      const whole = scanned(route, text, [text.length])
      const id = whole.verdict && `${whole.verdict.keyword} ${whole.verdict.instancePath}`
      if (id === null) {
        if (seen.size > 0) throw new Error(`not refused, though past its cap as it arrives: ${[...seen].join(', ')}`)
        if (!whole.complete) throw new Error('accepted, but not read to the end')
        tally.accepted++
      } else {
        if (!seen.has(id))
          throw new Error(`refused ${id}, which is not past its cap (${[...seen].join(', ') || 'none is'})`)
        if (!over.has(id)) throw new Error(`refused ${id}, which the contract's check accepts`)
        tally.refused++
      }
      for (const cap of route.caps)
        for (const { value: v } of valuesAt(value, cap.path))
          if (cap.keyword !== 'maxItems' && v !== null && typeof v === 'object' && structural(v) === cap.limit + 1)
            tally.atTheCap++
      const chunked = scanned(route, text, chunks)
      if (JSON.stringify(chunked) !== JSON.stringify(whole))
        throw new Error(`chunks ${chunks.join(',')} gave ${JSON.stringify(chunked)}, whole ${JSON.stringify(whole)}`)
      // A body cut short: no verdict yet, or the whole body's.
      const prefix = scanned(route, text.slice(0, Math.floor(cut * text.length)), chunks)
      if (prefix.verdict !== null && JSON.stringify(prefix.verdict) !== JSON.stringify(whole.verdict))
        throw new Error(`a prefix gave ${JSON.stringify(prefix.verdict)}, the whole ${JSON.stringify(whole.verdict)}`)
    }),
    { seed, numRuns: runs },
  )
  t.ok(tally.refused > 0 && tally.accepted > 0, `refused ${tally.refused}, accepted ${tally.accepted}`)
  t.ok(tally.atTheCap > 0, `${tally.atTheCap} capped values exactly one character past their cap`)
})

t.test('a value whose count reaches cap + 1 on its closing bracket is refused as it arrives', async (t) => {
  const route = routes.find((r) => r.caps.some((c) => c.keyword === 'x-max-json-bytes' && !c.array))!
  const cap = route.caps.find((c) => c.keyword === 'x-max-json-bytes' && !c.array)!
  // `{"pad":[0,...]}`: 2 + 3 + (2 + zeros - 1) structural characters.
  const counting = (count: number) => ({ pad: zeros(count - 6) })
  // The value at its place: a `*` step an array of one item.
  const build = (steps: string[], count: number): unknown => {
    if (steps.length === 0) return counting(count)
    const [step, ...rest] = steps
    return step === '*' ? [build(rest, count)] : { [step!]: build(rest, count) }
  }
  const bodyWith = (count: number) => JSON.stringify(build(cap.path, count))
  t.equal(structural(counting(cap.limit + 1)), cap.limit + 1)
  t.equal(scanned(route, bodyWith(cap.limit), [1 << 30]).verdict, null, `${cap.path.join('.')} at its cap: accepted`)
  t.match(
    scanned(route, bodyWith(cap.limit + 1), [1 << 30]).verdict,
    { keyword: 'x-max-json-bytes', params: { limit: cap.limit } },
    'one character past it: refused by the scan, not left to the check after parsing',
  )
})

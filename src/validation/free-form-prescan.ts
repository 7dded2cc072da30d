// Before JSON.parse: the free-form values whose size the schema caps with `x-max-json-bytes`
// (a telemetry event's `payload` and `top_results`, an error log's `context`, a conspectus's
// `cue_sheet`) are measured on the text, and the first one past its cap refuses the body (422,
// the keyword's item) as soon as the count passes it, without building the value: a 1 MiB
// `payload` of 90,000 keys took ~200 ms of CPU to parse, validate and refuse afterwards.
//
// The count is a lower bound of the value's compact JSON: its structural characters
// (`{ } [ ] , :`) outside strings and two quotes per string, all of which its serialization
// keeps. Members are counted as sent: an object that repeats a key counts each repetition.
import type { ErrorObject } from 'ajv'
import { operations, type OperationInfo } from '../../generated/operations.js'
import { escapePointer } from './schema-nodes.js'
import { sizeLimitsOf } from './json-size-limits.js'
import { closingQuote } from './json-text.js'

/** As the parse-time depth limit (src/plugins/app/json-body.ts). */
const MAX_DEPTH = 64
/** The path of a container no limit can be under. */
const UNMEASURED = '\u0000'

interface RouteLimits {
  /** The cap of each limited path, joined by "/" ('*' for array items). */
  byPath: Map<string, number>
  /** Paths that lead to a limit (its proper prefixes), joined by "/": keys are decoded only there. */
  prefixes: Set<string>
  /** A text no longer than this cannot pass any limit. */
  smallest: number
}

const byRoute = new Map<string, RouteLimits>()
for (const op of Object.values(operations as Record<string, OperationInfo>)) {
  if (!op.bodySchema) continue
  const limits = sizeLimitsOf(op.bodySchema)
  if (limits.length === 0) continue
  const prefixes = new Set<string>()
  for (const { path } of limits) for (let i = 0; i < path.length; i++) prefixes.add(path.slice(0, i).join('/'))
  byRoute.set(`${op.method} ${op.url}`, {
    byPath: new Map(limits.map((l) => [l.path.join('/'), l.limit])),
    prefixes,
    smallest: Math.min(...limits.map((l) => l.limit)),
  })
}

interface Frame {
  array: boolean
  /** The frame's path from the root ('*' for array items), joined by "/". */
  path: string
  /** Its JSON pointer (array items by index). */
  pointer: string
  /** Objects: the key whose value comes next (null when not decoded); arrays: the next item's index. */
  key: string | null
  index: number
  expectKey: boolean
}

/** The `x-max-json-bytes` failure of the first free-form value past its cap, or null. */
export function oversizeFreeFormValue(method: string, url: string, text: string): ErrorObject | null {
  const route = byRoute.get(`${method} ${url}`)
  if (!route || text.length <= route.smallest) return null
  const stack: Frame[] = []
  // The value being measured: the stack depth it opened at, its cap and its count so far.
  let measuring: { depth: number; limit: number; pointer: string } | null = null
  let count = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      const end = closingQuote(text, i)
      if (end < 0) return null // not JSON: the parser answers it
      if (measuring) count += 2
      else {
        const top = stack[stack.length - 1]
        if (top && !top.array && top.expectKey) {
          // Keys are decoded only on the way to a limit.
          top.expectKey = false
          if (route.prefixes.has(top.path)) {
            try {
              top.key = JSON.parse(text.slice(i, end + 1)) as string
            } catch {
              return null
            }
          } else top.key = null
        }
      }
      i = end
    } else if (c === 0x7b || c === 0x5b) {
      // Deeper than any body may nest: the depth check after parsing answers it.
      if (stack.length >= MAX_DEPTH) return null
      const parent = stack[stack.length - 1]
      let path = ''
      let pointer = ''
      if (measuring) {
        count++
        path = UNMEASURED
      } else if (parent) {
        const segment = parent.array ? '*' : parent.key
        // Under a key that leads to no limit, nothing is measured.
        path =
          segment === null || parent.path === UNMEASURED
            ? UNMEASURED
            : parent.path === ''
              ? segment
              : `${parent.path}/${segment}`
        const limit = route.byPath.get(path)
        if (limit !== undefined) {
          pointer = `${parent.pointer}/${parent.array ? parent.index : escapePointer(parent.key ?? '')}`
          measuring = { depth: stack.length, limit, pointer }
          count = 1
        } else if (route.prefixes.has(path)) {
          pointer = `${parent.pointer}/${parent.array ? parent.index : escapePointer(parent.key ?? '')}`
        }
      }
      stack.push({ array: c === 0x5b, path, pointer, key: null, index: 0, expectKey: c === 0x7b })
    } else if (c === 0x7d || c === 0x5d) {
      if (measuring) {
        count++
        if (stack.length - 1 === measuring.depth) measuring = null
      }
      stack.pop()
    } else if (c === 0x2c) {
      if (measuring) count++
      const top = stack[stack.length - 1]
      if (top) {
        if (top.array) top.index++
        else top.expectKey = true
      }
    } else if (c === 0x3a) {
      if (measuring) count++
    } else continue
    if (measuring && count > measuring.limit) {
      return {
        instancePath: measuring.pointer,
        schemaPath: 'x-max-json-bytes',
        keyword: 'x-max-json-bytes',
        params: { limit: measuring.limit },
        message: `must be at most ${measuring.limit} bytes as JSON`,
        data: undefined,
      }
    }
  }
  return null
}

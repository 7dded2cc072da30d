// Before JSON.parse: the free-form values whose size the schema caps with `x-max-json-bytes`
// (a telemetry event's `payload` and `top_results`, an error log's `context`, a conspectus's
// `cue_sheet`) are measured on the text as it arrives, and the first one past its cap refuses
// the body (422, the keyword's item) as soon as the count passes it, without building the value
// or reading the rest of the body (src/plugins/app/json-body.ts feeds the scan chunk by chunk).
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

/**
 * The scan of one body, fed its text as it arrives (chunk by chunk, or whole): it stops at the
 * first free-form value past its cap, so a body can be refused before the rest of it is read. A
 * string cut by the end of a chunk is carried over and scanned again with the next one.
 */
export class FreeFormScan {
  readonly #route: RouteLimits
  readonly #stack: Frame[] = []
  // The value being measured: the stack depth it opened at, its cap and its count so far.
  #measuring: { depth: number; limit: number; pointer: string } | null = null
  #count = 0
  #carry = ''
  /** Set once the text is not JSON: the parser answers it, the scan says nothing more. */
  #stopped = false

  constructor(route: RouteLimits) {
    this.#route = route
  }

  /** The `x-max-json-bytes` failure of the first free-form value past its cap, once the text so far shows one. */
  feed(chunk: string): ErrorObject | null {
    if (this.#stopped) return null
    const text = this.#carry + chunk
    this.#carry = ''
    const route = this.#route
    const stack = this.#stack
    let measuring = this.#measuring
    let count = this.#count
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i)
      if (c === 0x22) {
        const end = closingQuote(text, i)
        if (end < 0) {
          // The string goes on in the next chunk.
          this.#carry = text.slice(i)
          break
        }
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
                return this.#stop()
              }
            } else top.key = null
          }
        }
        i = end
      } else if (c === 0x7b || c === 0x5b) {
        // Deeper than any body may nest: the depth check after parsing answers it.
        if (stack.length >= MAX_DEPTH) return this.#stop()
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
    this.#measuring = measuring
    this.#count = count
    return null
  }

  #stop(): null {
    this.#stopped = true
    return null
  }
}

/** A scan for a body of this operation, or null when none of its values has a cap. */
export function freeFormScan(method: string, url: string): FreeFormScan | null {
  const route = byRoute.get(`${method} ${url}`)
  return route ? new FreeFormScan(route) : null
}

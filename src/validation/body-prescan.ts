// Before JSON.parse, one pass over a body's text as it arrives (src/plugins/app/json-body.ts
// feeds it chunk by chunk) for the bodies whose schema caps a value the parser would have to
// build first:
// - a free-form value capped with `x-max-json-bytes` (a telemetry event's `payload` and
//   `top_results`, an error log's `context`, a conspectus's `cue_sheet`) is measured, and the
//   first one past its cap refuses the body (422, the keyword's item);
// - a top-level array capped with `maxItems` is counted, and refused past its cap without
//   building its items (a 1 MiB array of `{}` is 349,000 objects to allocate);
// - on the way it notes the nesting depth and whether any string holds a `\u` escape or any
//   number has 16 digits or an exponent: the parse-time checks (json-body.ts) read these
//   instead of going over the text again.
// A refusal comes as soon as the count passes the cap, before the rest of the body is read.
//
// The count is a lower bound of the value's compact JSON: its structural characters
// (`{ } [ ] , :`) outside strings and two quotes per string, all of which its serialization
// keeps. Members are counted as sent: an object that repeats a key counts each repetition.
import type { ErrorObject } from 'ajv'
import { operations, type OperationInfo } from '../../generated/operations.js'
import { bodySchemaNode, pointerOf, resolve } from './schema-nodes.js'
import { sizeLimitsOf } from './json-size-limits.js'

/** As the parse-time depth limit (src/validation/json-body-rules.ts). */
export const MAX_DEPTH = 64

/** The caps at or under one place of a body: a tree with only the branches that lead to one. */
interface Caps {
  /** `x-max-json-bytes` of the value here. */
  maxJsonBytes?: number
  /** `maxItems` of the array here (top-level properties; deeper ones: the container guard). */
  maxItems?: number
  properties: Map<string, Caps>
  items: Caps | null
}

const emptyCaps = (): Caps => ({ properties: new Map(), items: null })

function capsOf(schemaName: string): Caps | null {
  const root = emptyCaps()
  let any = false
  const at = (path: string[]) =>
    path.reduce((node, step) => {
      if (step === '*') {
        node.items ??= emptyCaps()
        return node.items
      }
      const child = node.properties.get(step) ?? emptyCaps()
      node.properties.set(step, child)
      return child
    }, root)
  for (const { path, limit } of sizeLimitsOf(schemaName)) {
    at(path).maxJsonBytes = limit
    any = true
  }
  for (const [name, node] of Object.entries(bodySchemaNode(schemaName).properties ?? {})) {
    const maxItems = resolve(node).maxItems
    if (maxItems === undefined) continue
    at([name]).maxItems = maxItems
    any = true
  }
  return any ? root : null
}

const capsByRoute = new Map<string, Caps>()
for (const op of Object.values(operations as Record<string, OperationInfo>)) {
  const caps = op.bodySchema ? capsOf(op.bodySchema) : null
  if (caps) capsByRoute.set(`${op.method} ${op.url}`, caps)
}

interface Frame {
  array: boolean
  /** The caps under this container; null when none can be. */
  caps: Caps | null
  /** Objects: the key whose value comes next (decoded only where caps lie under it). */
  key: string | null
  /** Arrays: the index of the item being read. */
  index: number
  expectKey: boolean
}

const failure = (pointer: string, keyword: 'x-max-json-bytes' | 'maxItems', limit: number): ErrorObject => ({
  instancePath: pointer,
  schemaPath: keyword,
  keyword,
  params: { limit },
  message: keyword === 'maxItems' ? `must NOT have more than ${limit} items` : `must be at most ${limit} bytes as JSON`,
  data: undefined,
})

/** A string the scan is inside of at the end of a chunk. */
interface OpenString {
  /** The object frame whose next key this string is, when that key is decoded. */
  keyOf: Frame | null
  /** The key's raw text so far (kept only for a decoded key). */
  parts: string[]
  /** Whether the chunk ended on an escaping backslash. */
  escaped: boolean
}

/**
 * The index of the quote that ends a string whose text resumes at `from` (no escape pending
 * there), or -1: the first quote after `from` not preceded by an odd run of backslashes.
 */
function stringEnd(text: string, from: number): number {
  for (let end = text.indexOf('"', from); end >= 0; end = text.indexOf('"', end + 1)) {
    let slashes = 0
    while (end - 1 - slashes >= from && text.charCodeAt(end - 1 - slashes) === 0x5c) slashes++
    if (slashes % 2 === 0) return end
  }
  return -1
}

/** Whether string text from `from` to the end of `text` ends on an escaping backslash. */
function endsEscaped(text: string, from: number): boolean {
  let slashes = 0
  while (text.length - 1 - slashes >= from && text.charCodeAt(text.length - 1 - slashes) === 0x5c) slashes++
  return slashes % 2 === 1
}

/**
 * The scan of one body, fed its text as it arrives (chunk by chunk, or whole). Its state carries
 * over from one chunk to the next (inside a string, a number, a container), so each character is
 * read once however the body is cut: a body sent a few bytes at a time costs what it costs whole.
 */
export class BodyPrescan {
  readonly #stack: Frame[] = []
  readonly #root: Caps
  // The value being measured: the stack depth it opened at and its cap; its count so far.
  #measuring: { depth: number; limit: number } | null = null
  #count = 0
  /** The string a chunk ended inside of, if any. */
  #string: OpenString | null = null
  /** Digits in a row just read outside strings (a number may go on in the next chunk). */
  #digits = 0
  /** Whether the last chunk ended on a backslash (`\u` cut in two). */
  #backslashLast = false
  #mayHoldBadScalars = false
  /** Set once the text is not JSON or nests too deep: the parser answers it, the scan says nothing more. */
  #stopped = false

  constructor(root: Caps) {
    this.#root = root
  }

  /** Whether the scan read the whole text it was fed: then its depth and scalar answers hold. */
  get complete(): boolean {
    return !this.#stopped && this.#string === null && this.#stack.length === 0
  }

  /** Whether a string holds a `\u` escape (NUL, a lone surrogate) or a number may be unsafe (16 digits, an exponent). */
  get mayHoldBadScalars(): boolean {
    return this.#mayHoldBadScalars
  }

  /** The failure of the first capped value past its cap, once the text so far shows one. */
  feed(text: string): ErrorObject | null {
    if (this.#stopped || text.length === 0) return null
    // Outside strings a backslash is not JSON; inside one, `\u` is the only way to NUL or a lone surrogate.
    if (!this.#mayHoldBadScalars && (text.includes('\\u') || (this.#backslashLast && text.charCodeAt(0) === 0x75)))
      this.#mayHoldBadScalars = true
    this.#backslashLast = text.charCodeAt(text.length - 1) === 0x5c
    let i = 0
    const open = this.#string
    if (open) {
      // The string the last chunk ended in goes on here.
      const from = open.escaped ? 1 : 0
      const end = stringEnd(text, from)
      if (end < 0) {
        if (open.keyOf) open.parts.push(text)
        open.escaped = from < text.length ? endsEscaped(text, from) : false
        return null
      }
      this.#string = null
      if (open.keyOf) {
        open.parts.push(text.slice(0, end))
        if (!this.#takeKey(open.keyOf, open.parts.join(''))) return null
      }
      if (this.#measuring) {
        this.#count += 2
        if (this.#count > this.#measuring.limit) return this.#oversize()
      }
      i = end + 1
    }
    const stack = this.#stack
    let measuring = this.#measuring
    let count = this.#count
    let digits = this.#digits
    for (; i < text.length; i++) {
      const c = text.charCodeAt(i)
      if (c <= 0x39 && c >= 0x30) {
        if (++digits >= 16) this.#mayHoldBadScalars = true
        continue
      }
      if (digits > 0) {
        if (c === 0x65 || c === 0x45) this.#mayHoldBadScalars = true
        digits = 0
      }
      if (c === 0x22) {
        const top = stack[stack.length - 1]
        // Keys are decoded only where caps lie under them.
        let keyOf: Frame | null = null
        if (!measuring && top && !top.array && top.expectKey) {
          top.expectKey = false
          top.key = null
          if (top.caps && top.caps.properties.size > 0) keyOf = top
        }
        const end = stringEnd(text, i + 1)
        if (end < 0) {
          // The string goes on in the next chunk.
          this.#string = { keyOf, parts: keyOf ? [text.slice(i + 1)] : [], escaped: endsEscaped(text, i + 1) }
          break
        }
        if (keyOf && !this.#takeKey(keyOf, text.slice(i + 1, end))) return null
        if (measuring) count += 2
        i = end
      } else if (c === 0x7b || c === 0x5b) {
        // Deeper than any body may nest: the depth check after parsing answers it.
        if (stack.length >= MAX_DEPTH) return this.#stop()
        const parent = stack[stack.length - 1]
        let caps: Caps | null = null
        if (measuring) count++
        else if (!parent) caps = this.#root
        else if (parent.caps) {
          caps = parent.array
            ? parent.caps.items
            : parent.key === null
              ? null
              : (parent.caps.properties.get(parent.key) ?? null)
          if (caps?.maxJsonBytes !== undefined) {
            measuring = { depth: stack.length, limit: caps.maxJsonBytes }
            count = 1
          }
        }
        stack.push({ array: c === 0x5b, caps, key: null, index: 0, expectKey: c === 0x7b })
      } else if (c === 0x7d || c === 0x5d) {
        if (measuring) {
          count++
          // The closing character is the value's last: its count is checked before the value ends.
          if (count > measuring.limit) {
            this.#measuring = measuring
            return this.#oversize()
          }
          if (stack.length - 1 === measuring.depth) measuring = null
        }
        stack.pop()
      } else if (c === 0x2c) {
        if (measuring) count++
        const top = stack[stack.length - 1]
        if (top) {
          if (!top.array) top.expectKey = true
          else if (++top.index >= (top.caps?.maxItems ?? Infinity))
            return failure(this.#pointer(stack.length - 1), 'maxItems', top.caps!.maxItems!)
        }
      } else if (c === 0x3a) {
        if (measuring) count++
      } else continue
      if (measuring && count > measuring.limit) {
        this.#measuring = measuring
        return this.#oversize()
      }
    }
    this.#measuring = measuring
    this.#count = count
    this.#digits = digits
    return null
  }

  /** Sets a frame's next key from its raw JSON text; false (the scan stopped) when it is not a JSON string. */
  #takeKey(frame: Frame, raw: string): boolean {
    if (!raw.includes('\\')) {
      frame.key = raw
      return true
    }
    try {
      frame.key = JSON.parse(`"${raw}"`) as string
      return true
    } catch {
      this.#stop()
      return false
    }
  }

  #oversize(): ErrorObject {
    const { depth, limit } = this.#measuring!
    return failure(this.#pointer(depth), 'x-max-json-bytes', limit)
  }

  /** The JSON pointer of the container opened at stack depth `depth` (made only for a failure). */
  #pointer(depth: number): string {
    return pointerOf(this.#stack.slice(0, depth).map((frame) => (frame.array ? frame.index : (frame.key ?? ''))))
  }

  #stop(): null {
    this.#stopped = true
    return null
  }
}

/** A scan for a body of this operation, or null when none of its values has a cap. */
export function bodyPrescan(method: string, url: string): BodyPrescan | null {
  const caps = capsByRoute.get(`${method} ${url}`)
  return caps ? new BodyPrescan(caps) : null
}

/** What makes the scans of this operation's bodies (looked up once, when its route is made), or null when none of its values has a cap. */
export function bodyPrescans(method: string, url: string): (() => BodyPrescan) | null {
  const caps = capsByRoute.get(`${method} ${url}`)
  return caps ? () => new BodyPrescan(caps) : null
}

// The parse-time checks on a JSON body, on its text and on the parsed value.
import { type BodyPrescan, MAX_DEPTH } from './body-prescan.js'
import { closingQuote } from './json-text.js'
import { unacceptableNumber, unacceptableString } from './input-rules.js'

// Arbitrarily deep documents (past MAX_DEPTH) do not survive recursive serializers (refused at
// parse time as a malformed body, 422 `..._BODY_INVALID`). The string and number rules of
// input-rules.ts hold inside free-form JSON too: a value that breaks them is refused at parse time
// with its place (`loc` down to the item) and the code of the field that holds it, as schema
// validation does.

/** Where a refused value is, what is wrong with it, and its kind: the 422 item's `details.type`. */
export interface UnacceptableValue {
  path: (string | number)[]
  problem: string
  type: 'string_invalid' | 'number_invalid'
}

/** Where the first value that breaks the string or number rules sits, and why; or null. Only
 * called once the fast walk found one, so building paths here costs nothing on valid bodies. */
export function locateUnacceptable(value: unknown): UnacceptableValue | null {
  const stack: { node: unknown; path: (string | number)[] }[] = [{ node: value, path: [] }]
  while (stack.length > 0) {
    const { node, path } = stack.pop()!
    if (typeof node === 'string') {
      const problem = unacceptableString(node)
      if (problem) return { path, problem, type: 'string_invalid' }
    } else if (typeof node === 'number') {
      const problem = unacceptableNumber(node)
      if (problem) return { path, problem, type: 'number_invalid' }
    } else if (node !== null && typeof node === 'object') {
      // Pushed in reverse so the first offender in document order is found first.
      const entries: [string | number, unknown][] = Array.isArray(node)
        ? node.map((v, i) => [i, v])
        : Object.entries(node)
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, child] = entries[i]!
        if (typeof key === 'string') {
          const problem = unacceptableString(key)
          // The loc stops at the object: the name itself cannot be echoed.
          if (problem) return { path, problem: `has a property name that ${problem}`, type: 'string_invalid' }
        }
        stack.push({ node: child, path: [...path, key] })
      }
    }
  }
  return null
}

/** Why a parsed JSON value cannot be accepted, or null. Iterative: no recursion on input. */
export function unacceptableJson(value: unknown): string | null {
  // Two parallel stacks, not [node, depth] pairs: a 1 MiB body holds ~350,000 nodes.
  const nodes: unknown[] = [value]
  const depths: number[] = [1]
  while (nodes.length > 0) {
    const node = nodes.pop()
    const depth = depths.pop()!
    if (typeof node === 'string') {
      const problem = unacceptableString(node)
      if (problem) return problem
    } else if (typeof node === 'number') {
      const problem = unacceptableNumber(node)
      if (problem) return problem
    } else if (node !== null && typeof node === 'object') {
      if (depth > MAX_DEPTH) return `is nested deeper than ${MAX_DEPTH} levels`
      if (Array.isArray(node)) {
        for (let i = 0; i < node.length; i++) {
          nodes.push(node[i])
          depths.push(depth + 1)
        }
      } else {
        for (const key in node) {
          const problem = unacceptableString(key)
          if (problem) return problem
          nodes.push((node as Record<string, unknown>)[key])
          depths.push(depth + 1)
        }
      }
    }
  }
  return null
}

/** Whether JSON text (already known to parse) nests deeper than `limit`; skips strings. */
export function nestedDeeperThan(text: string, limit: number): boolean {
  let depth = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x22) {
      i = closingQuote(text, i)
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true
    } else if (c === 0x7d || c === 0x5d) depth--
  }
  return false
}

// NUL and lone surrogates can only come from `\u` escapes (raw control characters are not JSON,
// and the strict decoder refuses encoded surrogates); unsafe numbers need 16 digits or an
// exponent. Text without either skips the walk over every parsed node.
const MAY_HOLD_BAD_SCALARS = /\\u|[0-9][eE]|[0-9]{16}/

/**
 * The parse-time checks on a JSON body: depth, then scalars when they may be bad; read off the
 * prescan when it went over the whole text as it arrived, else off the text.
 */
export function unacceptableJsonText(text: string, value: unknown, scan?: BodyPrescan): string | null {
  if (scan?.complete) return scan.mayHoldBadScalars ? unacceptableJson(value) : null
  if (nestedDeeperThan(text, MAX_DEPTH)) return `is nested deeper than ${MAX_DEPTH} levels`
  return MAY_HOLD_BAD_SCALARS.test(text) ? unacceptableJson(value) : null
}

const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)"?/i

/** The declared charset is UTF-8 or absent (JSON is UTF-8 on the wire, RFC 8259). */
export function isUtf8ContentType(contentType: string | undefined): boolean {
  const charset = CHARSET.exec(contentType ?? '')?.[1]?.toLowerCase()
  return charset === undefined || charset === 'utf-8' || charset === 'utf8'
}

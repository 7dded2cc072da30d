import { Transform, type Readable } from 'node:stream'
import fp from 'fastify-plugin'
import type { FastifyRequest, preParsingHookHandler } from 'fastify'
import type { ErrorObject } from 'ajv'
import { type BodyPrescan, bodyPrescan, MAX_DEPTH } from '../../validation/body-prescan.js'
import { closingQuote } from '../../validation/json-text.js'
import { INPUT_RULE_SCHEMA_PATH, unacceptableNumber, unacceptableString } from '../../validation/input-rules.js'
import { pointerOf } from '../../validation/schema-nodes.js'

// Arbitrarily deep documents (past MAX_DEPTH) do not survive recursive serializers (refused at
// parse time as a malformed body, 422 `..._BODY_INVALID`). The string and number rules of
// input-rules.ts hold inside free-form JSON too: a value that breaks them is refused at parse time
// with its place (`loc` down to the item) and the code of the field that holds it, as schema
// validation does.

/** Where the first value that breaks the string or number rules sits, and why; or null. Only
 * called once the fast walk found one, so building paths here costs nothing on valid bodies. */
/** Where a refused value is, what is wrong with it, and its kind: the 422 item's `details.type`. */
export interface UnacceptableValue {
  path: (string | number)[]
  problem: string
  type: 'string_invalid' | 'number_invalid'
}

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

/**
 * A 422 whose one item is `item` (a body check's failure before schema validation). Without a
 * stack: it is an answer, never logged with one, and a flood of refusals should not pay for it.
 */
function refused(item: Partial<ErrorObject>) {
  const limit = Error.stackTraceLimit
  Error.stackTraceLimit = 0
  const error = new Error('body validation failed')
  Error.stackTraceLimit = limit
  return Object.assign(error, { statusCode: 422, validation: [item], validationContext: 'body' })
}

/** The body's text, decoded while it arrived, and the prescan that read it then. */
const DECODED = Symbol('decodedBody')
type Decoded = { [DECODED]?: { text: string; scan: BodyPrescan } }

/**
 * The body as it arrives, passed on unchanged, decoded (strict UTF-8) and fed to the prescan
 * chunk by chunk: a value past its cap refuses the request (422) as soon as it shows, and the
 * rest of the body is never read (the early answer closes the connection). The decoded text and
 * the scan are kept for the parser, so nothing is decoded or scanned twice. Text that is not
 * UTF-8 is left to the parser, which refuses it.
 */
function scanningBody(payload: Readable, scan: BodyPrescan, request: FastifyRequest): Readable {
  const decoder = new TextDecoder('utf-8', { fatal: true })
  const texts: string[] = []
  let decoding = true
  const scanned = new Transform({
    transform(chunk: Buffer, _encoding, next) {
      if (decoding) {
        let text: string
        try {
          text = decoder.decode(chunk, { stream: true })
        } catch {
          decoding = false
          texts.length = 0
          return next(null, chunk)
        }
        texts.push(text)
        const oversize = scan.feed(text)
        if (oversize) return next(refused(oversize))
      }
      next(null, chunk)
    },
    flush(done) {
      if (decoding) {
        try {
          texts.push(decoder.decode())
          ;(request as Decoded)[DECODED] = { text: texts.join(''), scan }
        } catch {
          // a sequence cut at the end: the parser refuses it
        }
      }
      done()
    },
  })
  // An aborted or failed upload fails the scanned stream too, and the body read ends with it.
  // (Not stream.pipeline: it makes and aborts an AbortController for every body.)
  payload.on('error', (err) => scanned.destroy(err))
  return payload.pipe(scanned)
}

const prescanBody: preParsingHookHandler = (request, _reply, payload, done) => {
  const scan = bodyPrescan(request.method, request.routeOptions.url ?? '')
  // A body the parser will refuse unread (another media type or charset: 415) is not scanned.
  const type = request.headers['content-type']
  if (!scan || !type?.toLowerCase().startsWith('application/json') || !isUtf8ContentType(type))
    return done(null, payload)
  done(null, scanningBody(payload, scan, request))
}

const malformed = (why: string) =>
  Object.assign(new Error(`JSON body ${why}`), { statusCode: 400, code: 'FST_ERR_CTP_INVALID_JSON_BODY' })

/**
 * application/json with Fastify's prototype-poisoning protection, read as bytes and decoded
 * strictly: invalid UTF-8 is refused instead of becoming U+FFFD, and another charset is 415.
 */
export default fp(
  async (fastify) => {
    const parseJson = fastify.getDefaultJsonParser('error', 'error')
    // Operations with capped values measure them as the body arrives.
    fastify.decorateRequest(DECODED as unknown as string, undefined)
    fastify.addHook('onRoute', (route) => {
      const methods = [route.method].flat()
      if (!methods.some((method) => bodyPrescan(method, route.url) !== null)) return
      route.preParsing = [...[route.preParsing ?? []].flat(), prescanBody]
    })
    const utf8 = new TextDecoder('utf-8', { fatal: true })
    fastify.removeContentTypeParser('application/json')
    fastify.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
      if (!isUtf8ContentType(request.headers['content-type'])) {
        return done(
          Object.assign(new Error('unsupported charset'), { statusCode: 415, code: 'FST_ERR_CTP_INVALID_MEDIA_TYPE' }),
          undefined,
        )
      }
      // An operation without a request body (DELETE) ignores an empty one that a client sent
      // with its usual Content-Type.
      if ((body as Buffer).length === 0 && !request.routeOptions.schema?.body) return done(null, undefined)
      const decoded = (request as Decoded)[DECODED]
      let text = decoded?.text
      if (text === undefined) {
        try {
          text = utf8.decode(body as Buffer)
        } catch {
          return done(malformed('is not valid UTF-8'), undefined)
        }
      }
      // The capped values were measured as the body arrived (prescanBody).
      parseJson(request, text, (err: Error | null, value?: unknown) => {
        if (err) return done(err, undefined)
        const problem = unacceptableJsonText(text, value, decoded?.scan)
        if (problem) {
          const found = problem.startsWith('is nested') ? null : locateUnacceptable(value)
          if (!found) return done(malformed(problem), undefined)
          // The bad value is not echoed (`input: null`): it is what could not be accepted.
          const item = {
            instancePath: pointerOf(found.path),
            schemaPath: INPUT_RULE_SCHEMA_PATH,
            keyword: found.type,
            params: {},
            message: found.problem,
            data: null,
          }
          return done(refused(item), undefined)
        }
        done(null, value)
      })
    })
  },
  { name: 'json-body' },
)

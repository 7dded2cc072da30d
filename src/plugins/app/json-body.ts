// JSON request bodies: the application/json parser (strict UTF-8, the parse-time rules of
// src/validation/json-body-rules.ts) and the prescan hook the request pipeline puts on the
// operations whose bodies have capped values.
import { Transform, type Readable } from 'node:stream'
import fp from 'fastify-plugin'
import type { FastifyRequest, preParsingHookHandler } from 'fastify'
import type { ErrorObject } from 'ajv'
import { type BodyPrescan, bodyPrescans } from '../../validation/body-prescan.js'
import { INPUT_RULE_SCHEMA_PATH } from '../../validation/input-rules.js'
import { isUtf8ContentType, locateUnacceptable, unacceptableJsonText } from '../../validation/json-body-rules.js'
import { pointerOf } from '../../validation/schema-nodes.js'

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

/**
 * The preParsing hook of an operation whose body has capped values (src/validation/body-prescan.ts),
 * or null when it has none: the request pipeline puts it on the operation's route.
 */
export function prescanHookFor(method: string, url: string): preParsingHookHandler | null {
  const newScan = bodyPrescans(method, url)
  if (!newScan) return null
  // Named: the order-of-checks test reads hooks by name.
  return function prescanBody(request, _reply, payload, done) {
    // A body the parser will refuse unread (another media type or charset: 415) is not scanned.
    const type = request.headers['content-type']
    if (!type?.toLowerCase().startsWith('application/json') || !isUtf8ContentType(type)) return done(null, payload)
    done(null, scanningBody(payload, newScan(), request))
  }
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
    // Operations with capped values measure them as the body arrives (prescanHookFor).
    fastify.decorateRequest(DECODED as unknown as string, undefined)
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

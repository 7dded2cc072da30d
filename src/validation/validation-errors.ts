// Turns Ajv errors into the 422 items of the contract, one item per failing field, with the
// code chosen from the error catalogue by the operation's validation group.
import type { ErrorObject } from 'ajv'
import { catalogueEntry, validationEntries, type CatalogueEntry } from '../errors.js'
import { INPUT_RULE_SCHEMA_PATH } from './input-rules.js'

export type RequestPart = 'body' | 'params' | 'querystring' | 'headers'

export interface ValidationItem {
  code: string
  key: string
  message: string
  field: string | null
  source: 'validation'
  details: { loc: (string | number)[]; type: string; input: unknown; ctx: Record<string, unknown> }
}

const LOC_ROOT: Record<RequestPart, string> = { body: 'body', params: 'path', querystring: 'query', headers: 'header' }

function segments(instancePath: string): (string | number)[] {
  if (!instancePath) return []
  return instancePath
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s))
}

function pick(group: string, field: string | null, keyword: string): CatalogueEntry | undefined {
  const entries = validationEntries(group)
  const on = (e: CatalogueEntry, k: string) => 'on' in e && (e.on as readonly string[]).includes(k)
  const forField = entries.filter((e) => 'field' in e && e.field === field)
  const catchAll = entries.filter((e) => 'field' in e && e.field === '*')
  return (
    forField.find((e) => on(e, keyword)) ??
    forField.find((e) => on(e, '*')) ??
    catchAll.find((e) => on(e, keyword)) ??
    catchAll.find((e) => on(e, '*'))
  )
}

/** The field's own entry for a keyword, or its catch-all; never another field's or the group's. */
function pickForField(group: string, field: string | null, keyword: string): CatalogueEntry | undefined {
  const forField = validationEntries(group).filter((e) => 'field' in e && e.field === field)
  const on = (e: CatalogueEntry, k: string) => 'on' in e && (e.on as readonly string[]).includes(k)
  return forField.find((e) => on(e, keyword)) ?? forField.find((e) => on(e, '*'))
}

function hasFieldEntry(group: string, field: string): boolean {
  return validationEntries(group).some((e) => 'field' in e && e.field === field)
}

/** A 422 lists at most this many items: the first failures in document order. */
export const MAX_VALIDATION_ITEMS = 50
/** An echoed string is cut to this many characters; a container is echoed only up to this many bytes of JSON. */
export const MAX_ECHO = 256
/** The whole 422 body stays under this many bytes. */
export const MAX_VALIDATION_BODY_BYTES = 64 * 1024

/** A string cut to `max` characters, without leaving half a surrogate pair at the end. */
function cut(s: string, max = MAX_ECHO): string {
  if (s.length <= max) return s
  const head = s.slice(0, max)
  return /[\uD800-\uDBFF]$/.test(head) ? head.slice(0, -1) : head
}

/** Whether a value's JSON is at most `limit` bytes; walks at most about `limit` nodes. */
function jsonWithin(value: unknown, limit: number): boolean {
  let budget = limit
  const stack: unknown[] = [value]
  while (stack.length > 0) {
    const node = stack.pop()
    budget -= typeof node === 'string' ? node.length + 2 : 2
    if (budget < 0) return false
    if (Array.isArray(node)) stack.push(...node.slice(0, limit))
    else if (node !== null && typeof node === 'object') {
      for (const [k, v] of Object.entries(node)) {
        budget -= k.length + 3
        if (budget < 0) return false
        stack.push(v)
      }
    }
  }
  return Buffer.byteLength(JSON.stringify(value), 'utf8') <= limit
}

/** What `details.input` may echo: scalars, strings cut short, small containers; else null. */
export function echoable(value: unknown): unknown {
  if (value === undefined || value === null) return null
  if (typeof value === 'string') return cut(value)
  if (typeof value !== 'object') return value
  return jsonWithin(value, MAX_ECHO) ? value : null
}

const cutSegment = (s: string | number) => (typeof s === 'string' ? cut(s) : s)

export function toValidationItems(part: RequestPart, errors: ErrorObject[], group: string | null): ValidationItem[] {
  const items: ValidationItem[] = []
  const seen = new Set<string>()
  for (const e of errors) {
    if (items.length >= MAX_VALIDATION_ITEMS) break
    const loc = segments(e.instancePath).map(cutSegment)
    const extra =
      e.keyword === 'required'
        ? (e.params as { missingProperty: string }).missingProperty
        : e.keyword === 'additionalProperties'
          ? (e.params as { additionalProperty: string }).additionalProperty
          : undefined
    if (extra !== undefined) loc.push(cut(extra))
    // One item per failing field, keyed on the full path (the echoed loc may be cut).
    const locKey = `${e.instancePath}\u0000${extra ?? ''}`
    if (seen.has(locKey)) continue
    seen.add(locKey)

    const names = [...loc].reverse().filter((s): s is string => typeof s === 'string')
    // A value refused at parse time inside a free-form field (`payload.n`) takes the code of the
    // nearest enclosing field the group names; schema errors keep the innermost name.
    const inputRule = e.schemaPath === INPUT_RULE_SCHEMA_PATH && part === 'body' && group
    const field = (inputRule ? names.find((n) => hasFieldEntry(group, n)) : undefined) ?? names[0] ?? null
    const input =
      e.keyword === 'required' ? null : extra !== undefined ? (e.data as Record<string, unknown>)?.[extra] : e.data
    // A value refused by the input rules (NUL, a lone surrogate, an unsafe number) takes the
    // field's entry for that kind (`on: [string_invalid]`) or its catch-all, else the field's
    // entry for a wrong type; its message is its own, naming what is wrong with the value.
    const entry = !(part === 'body' && group)
      ? undefined
      : inputRule
        ? (pickForField(group, field, e.keyword) ?? pick(group, field, 'type'))
        : pick(group, field, loc.length === 0 ? '$root' : e.keyword)
    const common = catalogueEntry('REQUEST_PARAMETER_INVALID')
    const chosen = entry ?? common
    const where = inputRule ? loc.join('.') : (field ?? 'value')
    items.push({
      code: chosen.code,
      key: chosen.key,
      message:
        entry && !inputRule ? entry.message : `${LOC_ROOT[part]} ${where || 'value'} ${e.message ?? 'is invalid'}`,
      field,
      source: 'validation',
      details: {
        loc: [LOC_ROOT[part], ...loc],
        type: e.keyword,
        input: echoable(input),
        ctx: boundedContext(e.params),
      },
    })
  }
  return items
}

/** Keyword parameters, with any string (an unknown property's name) cut like an input. */
function boundedContext(params: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(params).map(([k, v]) => [k, typeof v === 'string' ? cut(v) : v]))
}

/** The 422 body: as many of the items as fit in MAX_VALIDATION_BODY_BYTES (at least one). */
export function validationBody(method: string, path: string, items: ValidationItem[]) {
  const endpoint = `${method} ${cut(path, 2048)}`
  let bytes = 128 + Buffer.byteLength(endpoint)
  const kept: ValidationItem[] = []
  for (const item of items.slice(0, MAX_VALIDATION_ITEMS)) {
    bytes += Buffer.byteLength(JSON.stringify(item)) + 1
    if (bytes > MAX_VALIDATION_BODY_BYTES && kept.length > 0) break
    kept.push(item)
  }
  return { error_type: 'validation_error' as const, endpoint, errors: kept }
}

/** The single item for a body that is not JSON at all (or not parseable). */
export function malformedBodyItem(group: string | null): ValidationItem {
  const entry = (group && pick(group, null, '$root')) || catalogueEntry('REQUEST_PARAMETER_INVALID')
  return {
    code: entry.code,
    key: entry.key,
    message: entry.message,
    field: null,
    source: 'validation',
    details: { loc: ['body'], type: 'json_invalid', input: null, ctx: {} },
  }
}

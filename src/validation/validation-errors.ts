// Turns Ajv errors into the 422 items of the contract, one item per failing field, with the
// code chosen from the error catalogue by the operation's validation group.
import type { ErrorObject } from 'ajv'
import { catalogueEntry, validationEntries, type CatalogueEntry } from '../errors.js'

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

export function toValidationItems(part: RequestPart, errors: ErrorObject[], group: string | null): ValidationItem[] {
  const items: ValidationItem[] = []
  const seen = new Set<string>()
  for (const e of errors) {
    const loc = segments(e.instancePath)
    const extra =
      e.keyword === 'required'
        ? (e.params as { missingProperty: string }).missingProperty
        : e.keyword === 'additionalProperties'
          ? (e.params as { additionalProperty: string }).additionalProperty
          : undefined
    if (extra !== undefined) loc.push(extra)
    const locKey = JSON.stringify(loc)
    if (seen.has(locKey)) continue
    seen.add(locKey)

    const field = ([...loc].reverse().find((s) => typeof s === 'string') as string | undefined) ?? null
    const input =
      e.keyword === 'required' ? null : extra !== undefined ? (e.data as Record<string, unknown>)?.[extra] : e.data
    const entry = part === 'body' && group ? pick(group, field, loc.length === 0 ? '$root' : e.keyword) : undefined
    const common = catalogueEntry('REQUEST_PARAMETER_INVALID')
    const chosen = entry ?? common
    items.push({
      code: chosen.code,
      key: chosen.key,
      message: entry ? entry.message : `${LOC_ROOT[part]} ${field ?? 'value'} ${e.message ?? 'is invalid'}`,
      field,
      source: 'validation',
      details: { loc: [LOC_ROOT[part], ...loc], type: e.keyword, input: input ?? null, ctx: { ...e.params } },
    })
  }
  return items
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

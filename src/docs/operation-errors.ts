// Which catalogue codes each operation can answer, derived from spec/openapi.yaml alone, so the
// documentation, the contract tests and the catalogue cannot drift apart.
//
// An `x-error-catalogue` entry applies to an operation that declares the entry's status and
//   - is named in the entry's `operations` (operationIds or one of the groups below), or
//   - has the entry's validation `group` as its `x-validation-group` (422 body codes), or
//   - when the entry has neither: every operation that declares that status.

// A parsed OpenAPI document (or a part of it), walked loosely: redocly and spectral check its shape.
// biome-ignore lint/suspicious/noExplicitAny: see above
export type OpenApiNode = any

export interface CatalogueEntry {
  code: string
  key: string
  status: number
  source: string
  message: string
  group?: string | string[]
  field?: string
  on?: string[]
  operations?: string | string[]
}

export interface OperationRef {
  operationId: string
  method: string
  path: string
  operation: Record<string, OpenApiNode>
  /** Path-level and operation-level parameters, $refs resolved. */
  parameters: Array<{ name: string; in: string; $ref?: string }>
  /** Names of the parameter components the operation references. */
  parameterRefs: string[]
}

/** Operation groups an entry may name in `operations`. */
export const OPERATION_GROUPS: Record<string, (op: OperationRef) => boolean> = {
  // Writes that take an Idempotency-Key header.
  idempotent: (op) => op.parameterRefs.includes('IdempotencyKey'),
  // Operations with a path or query parameter.
  'with-parameters': (op) => op.parameters.some((p) => p.in === 'path' || p.in === 'query'),
  // Operations that take a request body.
  'with-body': (op) => op.operation.requestBody !== undefined,
}

const METHODS = ['get', 'put', 'post', 'patch', 'delete'] as const

export function listOperations(spec: OpenApiNode): OperationRef[] {
  const ops: OperationRef[] = []
  for (const [path, pathItem] of Object.entries<OpenApiNode>(spec.paths)) {
    for (const method of METHODS) {
      const operation = pathItem[method]
      if (!operation) continue
      const raw = [...(pathItem.parameters ?? []), ...(operation.parameters ?? [])]
      ops.push({
        operationId: operation.operationId,
        method: method.toUpperCase(),
        path,
        operation,
        parameters: raw.map((p: OpenApiNode) => (p.$ref ? spec.components.parameters[p.$ref.split('/').pop()] : p)),
        parameterRefs: raw.map((p: OpenApiNode) => p.$ref?.split('/').pop()).filter(Boolean),
      })
    }
  }
  return ops
}

function asList(v: string | string[] | undefined): string[] | undefined {
  return v === undefined ? undefined : Array.isArray(v) ? v : [v]
}

const ENVELOPES = new Set(['#/components/schemas/ErrorEnvelope', '#/components/schemas/ValidationErrorResponse'])

/** Whether the operation answers `status` with an error envelope: shared responses all do; an
 * inline one may declare another body (GET /ready's 503 is a ReadyResponse), and then no
 * catalogue code applies to it. */
function answersEnvelope(op: OperationRef, status: string): boolean {
  const response = op.operation.responses?.[status]
  if (response === undefined) return false
  if (response.$ref) return true
  const schema = response.content?.['application/json']?.schema
  return schema === undefined || ENVELOPES.has(schema.$ref)
}

export function entryApplies(entry: CatalogueEntry, op: OperationRef): boolean {
  if (!answersEnvelope(op, String(entry.status))) return false
  const named = asList(entry.operations)
  if (named) return named.some((n) => n === op.operationId || OPERATION_GROUPS[n]?.(op) === true)
  const groups = asList(entry.group)
  if (groups) return groups.includes(op.operation['x-validation-group'])
  return true
}

/** operationId -> status -> the catalogue entries that operation can answer with that status. */
export function errorCodesByOperation(spec: OpenApiNode): Map<string, Map<string, CatalogueEntry[]>> {
  const catalogue = spec['x-error-catalogue'] as CatalogueEntry[]
  const known = new Set([...listOperations(spec).map((o) => o.operationId), ...Object.keys(OPERATION_GROUPS)])
  for (const entry of catalogue) {
    for (const name of asList(entry.operations) ?? []) {
      if (!known.has(name)) throw new Error(`x-error-catalogue ${entry.key}: unknown operation or group "${name}"`)
    }
  }
  const result = new Map<string, Map<string, CatalogueEntry[]>>()
  for (const op of listOperations(spec)) {
    const byStatus = new Map<string, CatalogueEntry[]>()
    for (const entry of catalogue) {
      if (!entryApplies(entry, op)) continue
      const status = String(entry.status)
      byStatus.set(status, [...(byStatus.get(status) ?? []), entry])
    }
    result.set(op.operationId, byStatus)
  }
  return result
}

/** The example body a client receives for this entry on this operation. */
export function exampleBody(entry: CatalogueEntry, op: OperationRef): unknown {
  if (entry.source !== 'validation')
    return { code: entry.code, key: entry.key, message: entry.message, source: entry.source }
  const param = op.parameters.find((p) => p.in === 'path' || p.in === 'query')
  const field = entry.field === undefined ? (param?.name ?? null) : entry.field === '*' ? null : entry.field
  const where = entry.field === undefined ? (param?.in ?? 'query') : 'body'
  const keyword = entry.on?.find((k) => k !== '*') ?? (field === null ? 'type' : 'format')
  return {
    error_type: 'validation_error',
    endpoint: `${op.method} ${op.path}`,
    errors: [
      {
        code: entry.code,
        key: entry.key,
        message: entry.message,
        field,
        source: 'validation',
        details: { loc: field === null ? [where] : [where, field], type: keyword, input: null, ctx: {} },
      },
    ],
  }
}

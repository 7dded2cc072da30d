// The scope of an idempotent write, derived from the operation and its path parameters, never
// written by hand: the path with its concrete values, UUID parameters lower-cased (so one
// resource is one scope whatever case the client sent), and `PATCH ` in front for PATCH (PUT
// and PATCH on one URL stay apart). For example `PATCH /api/v1/conspectuses/0b8f...`.
import { operations, type OperationInfo } from '../../generated/operations.js'

export type ScopeOf = (params: Record<string, string>) => string

function scopeBuilder(op: OperationInfo): ScopeOf {
  const prefix = op.method === 'PATCH' ? 'PATCH ' : ''
  const uuids = new Set(op.uuidPathParams)
  const pieces = op.path.split(/{(\w+)}/) // literal, name, literal, name, ..., literal
  if (pieces.length === 1) {
    const fixed = prefix + op.path
    return () => fixed
  }
  return (params) => {
    let scope = prefix
    for (let i = 0; i < pieces.length; i++) {
      if (i % 2 === 0) {
        scope += pieces[i]
      } else {
        const value = String(params[pieces[i]!] ?? '')
        scope += uuids.has(pieces[i]!) ? value.toLowerCase() : value
      }
    }
    return scope
  }
}

const builders = new Map<string, ScopeOf>(
  Object.entries(operations)
    .filter(([, op]) => op.idempotent || op.idempotencyKeyOptional)
    .map(([id, op]) => [id, scopeBuilder(op)]),
)

/** The scope of operation `operationId` for these path parameters. */
export function idempotencyScope(operationId: string, params: Record<string, string>): string {
  const build = builders.get(operationId)
  if (!build) throw new Error(`operation ${operationId} is not idempotent in the spec`)
  return build(params)
}

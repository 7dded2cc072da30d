// The document served at /openapi.json (and read by /docs): spec/openapi.yaml with, on every
// error response of every operation, the catalogue codes that operation can answer — a table in
// the description, `x-error-codes` for tools, and one example per code. Built once at start, so
// spec/openapi.yaml stays hand-maintained and the per-operation lists cannot drift from it.
import {
  errorCodesByOperation,
  exampleBody,
  listOperations,
  type CatalogueEntry,
  type OpenApiNode,
} from './operation-errors.js'

export function buildServedDocument(spec: OpenApiNode): OpenApiNode {
  const doc = structuredClone(spec)
  hoistPathParameters(doc)
  const codes = errorCodesByOperation(doc)
  for (const op of listOperations(doc)) {
    const byStatus = codes.get(op.operationId)!
    for (const [status, declared] of Object.entries<OpenApiNode>(op.operation.responses)) {
      const entries = byStatus.get(status)
      if (!entries?.length) continue
      // Inline the shared response so that this operation gets its own examples.
      const response = structuredClone(
        declared.$ref ? doc.components.responses[declared.$ref.split('/').pop()] : declared,
      )
      response.description = `${response.description}\n\n${codeTable(entries)}`
      response['x-error-codes'] = entries.map((e) => ({ code: e.code, key: e.key }))
      const media = response.content?.['application/json']
      if (media) {
        media.examples = Object.fromEntries(
          entries.map((e) => [e.key, { summary: `${e.code} ${e.key}`, value: exampleBody(e, op) }]),
        )
      }
      op.operation.responses[status] = response
    }
  }
  return doc
}

// Path-level parameters copied onto each operation (the same meaning in OpenAPI): Swagger UI
// leaves path-level `$ref` parameters unresolved ("any") next to operation-level ones.
function hoistPathParameters(doc: OpenApiNode): void {
  for (const item of Object.values<OpenApiNode>(doc.paths)) {
    if (!item.parameters) continue
    for (const method of ['get', 'put', 'post', 'patch', 'delete']) {
      if (item[method]) item[method].parameters = [...item.parameters, ...(item[method].parameters ?? [])]
    }
    delete item.parameters
  }
}

function codeTable(entries: CatalogueEntry[]): string {
  const cell = (s: string) => s.replace(/\|/g, '\\|')
  return [
    '| Code | Key | Meaning |',
    '| --- | --- | --- |',
    ...entries.map((e) => `| \`${e.code}\` | \`${e.key}\` | ${cell(e.message)} |`),
  ].join('\n')
}

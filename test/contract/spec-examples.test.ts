// Every example in the contract validates against its own schema, and every operation is
// documented: a summary, and a description that names its business errors.
import t, { type Test } from 'tap'
import { readFileSync } from 'node:fs'
import { parse } from 'yaml'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import { schemas, schemaId } from '../../generated/schemas.js'
import { errorCatalogue } from '../../generated/error-catalogue.js'
import { addProjectFormats } from '../../src/validation/formats.js'
import { specPath } from '../../src/paths.js'
import { buildServedDocument } from '../../src/docs/served-document.js'

const spec = parse(readFileSync(specPath, 'utf8'))
const ajv = new Ajv2020({ strict: false, allErrors: true, allowUnionTypes: true })
addFormats.default(ajv)
addProjectFormats(ajv)
for (const schema of Object.values(schemas)) ajv.addSchema(schema as object)
const rewrite = (schema: unknown) =>
  JSON.parse(JSON.stringify(schema).replace(/"#\/components\/schemas\/(\w+)"/g, (_m, n) => JSON.stringify(schemaId(n))))

// Every example of a document: schema-level `examples` lists, and the `example`/`examples` of
// media types, parameters and headers against their `schema`.
function checkExamples(t: Test, doc: any, label: string): void {
  let schemaLevel = 0
  let beside = 0
  const visit = (node: any, where: string) => {
    if (!node || typeof node !== 'object') return
    if (Array.isArray(node.examples) && (node.type || node.$ref || node.properties)) {
      const { examples, ...schema } = node
      const validate = ajv.compile(rewrite(schema))
      for (const example of examples) {
        schemaLevel++
        t.ok(validate(example), `${label} ${where}: ${ajv.errorsText(validate.errors)}`)
      }
    }
    if (node.schema && typeof node.schema === 'object' && (node.examples || 'example' in node)) {
      const validate = ajv.compile(rewrite(node.schema))
      const named =
        !Array.isArray(node.examples) && node.examples
          ? Object.entries<any>(node.examples).map(([n, e]) => [n, e.value] as const)
          : []
      for (const [name, value] of 'example' in node ? [...named, ['example', node.example] as const] : named) {
        beside++
        t.ok(validate(value), `${label} ${where} example ${name}: ${ajv.errorsText(validate.errors)}`)
      }
    }
    for (const [k, v] of Object.entries(node)) if (k !== 'examples' && k !== 'example') visit(v, `${where}/${k}`)
  }
  visit(doc.components, '#/components')
  visit(doc.paths, '#/paths')
  t.ok(schemaLevel >= 20, `${label}: ${schemaLevel} schema-level examples checked`)
  t.ok(beside >= 10, `${label}: ${beside} media-type, parameter and header examples checked`)
}

t.test('every example in spec/openapi.yaml matches its schema', async (t) => checkExamples(t, spec, 'spec'))

// The served /openapi.json adds one example per error code on each error response
// (src/docs/served-document.ts): those must match the response's schema too.
t.test('every example in the served /openapi.json matches its schema', async (t) =>
  checkExamples(t, buildServedDocument(spec), 'served'),
)

t.test('every operation has a summary and a description naming its business errors', async (t) => {
  const codes = new Set(errorCatalogue.map((e) => e.code))
  for (const [path, item] of Object.entries<any>(spec.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      if (!op?.operationId) continue
      t.ok(op.summary, `${op.operationId} has a summary`)
      t.ok(op.description, `${op.operationId} has a description`)
      for (const mentioned of (op.description ?? '').match(/\b[A-Z]+_\d{3}\b/g) ?? []) {
        t.ok(codes.has(mentioned), `${method} ${path} mentions ${mentioned}, which is catalogued`)
      }
      if (path.startsWith('/api/v1'))
        t.match(op.description, /Business errors/, `${op.operationId} lists its business errors`)
    }
  }
})

t.test('the error catalogue is consistent', async (t) => {
  const keys = errorCatalogue.map((e) => e.key)
  t.equal(new Set(keys).size, keys.length, 'keys are unique')
  for (const e of errorCatalogue) {
    t.match(e.code, /^(COMMON|USER|CONS|ERRLOG|TELEMETRY|KEYS)_\d{3}$/, e.key)
    t.ok(['business', 'security', 'validation', 'internal'].includes(e.source), e.key)
    if (e.status === 422 && e.code !== 'COMMON_422')
      t.ok('group' in e && 'field' in e && 'on' in e, `${e.key} is selectable`)
  }
})

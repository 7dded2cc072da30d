// Every example in the contract validates against its own schema, and every operation is
// documented: a summary, and a description that names its business errors.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { parse } from 'yaml'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import { schemas, schemaId } from '../../generated/schemas.js'
import { errorCatalogue } from '../../generated/error-catalogue.js'
import { addProjectFormats } from '../../src/validation/formats.js'
import { specPath } from '../../src/paths.js'

const spec = parse(readFileSync(specPath, 'utf8'))
const ajv = new Ajv2020({ strict: false, allErrors: true, allowUnionTypes: true })
addFormats.default(ajv)
addProjectFormats(ajv)
for (const schema of Object.values(schemas)) ajv.addSchema(schema as object)
const rewrite = (schema: unknown) =>
  JSON.parse(JSON.stringify(schema).replace(/"#\/components\/schemas\/(\w+)"/g, (_m, n) => JSON.stringify(schemaId(n))))
const deref = (node: any, kind: string) => (node?.$ref ? spec.components[kind][node.$ref.split('/').pop()] : node)

t.test('schema-level examples match their schemas', async (t) => {
  let checked = 0
  const visit = (node: any, where: string) => {
    if (!node || typeof node !== 'object') return
    if (Array.isArray(node.examples) && (node.type || node.$ref || node.properties)) {
      const { examples, ...schema } = node
      const validate = ajv.compile(rewrite(schema))
      for (const example of examples) {
        checked++
        t.ok(validate(example), `${where}: ${ajv.errorsText(validate.errors)}`)
      }
    }
    for (const [k, v] of Object.entries(node)) if (k !== 'examples') visit(v, `${where}/${k}`)
  }
  visit(spec.components, '#/components')
  visit(spec.paths, '#/paths')
  t.ok(checked >= 20, `${checked} examples checked`)
})

t.test('media-type examples match the response or request schema', async (t) => {
  let checked = 0
  const mediaTypes: [string, any][] = []
  for (const [name, response] of Object.entries<any>(spec.components.responses)) mediaTypes.push([`responses/${name}`, response.content?.['application/json']])
  for (const [path, item] of Object.entries<any>(spec.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      if (!op?.responses) continue
      for (const [status, r] of Object.entries<any>(op.responses)) mediaTypes.push([`${method} ${path} ${status}`, deref(r, 'responses').content?.['application/json']])
    }
  }
  for (const [where, media] of mediaTypes) {
    if (!media?.examples || !media.schema) continue
    const validate = ajv.compile(rewrite(media.schema))
    for (const [name, example] of Object.entries<any>(media.examples)) {
      checked++
      t.ok(validate(example.value), `${where} example ${name}: ${ajv.errorsText(validate.errors)}`)
    }
  }
  t.ok(checked >= 10, `${checked} media-type examples checked`)
})

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
      if (path.startsWith('/api/v1')) t.match(op.description, /Business errors/, `${op.operationId} lists its business errors`)
    }
  }
})

t.test('the error catalogue is consistent', async (t) => {
  const keys = errorCatalogue.map((e) => e.key)
  t.equal(new Set(keys).size, keys.length, 'keys are unique')
  for (const e of errorCatalogue) {
    t.match(e.code, /^(COMMON|USER|CONS|ERRLOG|TELEMETRY)_\d{3}$/, e.key)
    t.ok(['business', 'security', 'validation', 'internal'].includes(e.source), e.key)
    if (e.status === 422 && e.code !== 'COMMON_422') t.ok('group' in e && 'field' in e && 'on' in e, `${e.key} is selectable`)
  }
})

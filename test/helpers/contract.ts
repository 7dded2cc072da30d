// Checks every response the tests receive against spec/openapi.yaml: the status must be
// declared for the operation, the body must match the declared schema and every header the
// spec marks required must be present. Every error code in a body must be one the served
// document lists for that operation and status (src/docs/operation-errors.ts).
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import type { ValidateFunction } from 'ajv'
import { schemas, schemaId } from '../../generated/schemas.js'
import { addProjectFormats } from '../../src/validation/formats.js'
import { readSpec } from '../../src/spec.js'
import { errorCodesByOperation } from '../../src/docs/operation-errors.js'

const spec = readSpec()
const listedCodes = errorCodesByOperation(spec)
// The schemas are not checked against JSON Schema's meta-schema here (compiling that costs each
// test file a tenth of a second): the spec's linters and make generate's Ajv check them.
const ajv = new Ajv2020({ strict: false, allErrors: true, allowUnionTypes: true, validateSchema: false })
addFormats.default(ajv)
addProjectFormats(ajv)
for (const schema of Object.values(schemas)) ajv.addSchema(schema as object)

interface Route {
  method: string
  template: string
  regex: RegExp
  params: number
  operation: Record<string, any>
}

const routes: Route[] = []
for (const [template, item] of Object.entries<any>(spec.paths)) {
  for (const method of ['get', 'post', 'put', 'patch', 'delete']) {
    if (!item[method]) continue
    const regex = new RegExp(`^${template.replace(/{\w+}/g, '[^/]+')}$`)
    routes.push({
      method: method.toUpperCase(),
      template,
      regex,
      params: (template.match(/{/g) ?? []).length,
      operation: item[method],
    })
  }
}
routes.sort((a, b) => a.params - b.params) // static segments win over parameters

const deref = (node: any, kind: string) => (node?.$ref ? spec.components[kind][node.$ref.split('/').pop()] : node)
const validators = new Map<string, ValidateFunction>()

function bodyValidator(key: string, schema: any): ValidateFunction {
  let v = validators.get(key)
  if (!v) {
    const rewritten = JSON.parse(
      JSON.stringify(schema).replace(/"#\/components\/schemas\/(\w+)"/g, (_m, n) => JSON.stringify(schemaId(n))),
    )
    v = ajv.compile(rewritten)
    validators.set(key, v)
  }
  return v
}

export function findRoute(method: string, path: string): Route | undefined {
  return routes.find((r) => r.method === method && r.regex.test(path))
}

/** Problems of one response against the contract (empty when it conforms). */
export function contractProblems(
  method: string,
  url: string,
  status: number,
  headers: Record<string, unknown>,
  body: string,
): string[] {
  const path = url.split('?')[0]!
  const route = findRoute(method, path)
  if (!route) return []
  const declared = deref(route.operation.responses[String(status)], 'responses')
  const where = `${method} ${route.template} -> ${status}`
  if (!declared) return [`${where}: status not declared in the spec`]
  const problems: string[] = []
  for (const [name, header] of Object.entries<any>(declared.headers ?? {})) {
    if (deref(header, 'headers')?.required && headers[name.toLowerCase()] === undefined)
      problems.push(`${where}: missing header ${name}`)
  }
  const content = declared.content?.['application/json']
  if (content?.schema) {
    let parsed: unknown
    try {
      parsed = JSON.parse(body)
    } catch {
      return [...problems, `${where}: body is not JSON`]
    }
    const validate = bodyValidator(`${where}`, content.schema)
    if (!validate(parsed)) problems.push(`${where}: body does not match schema: ${ajv.errorsText(validate.errors)}`)
    problems.push(...unlistedCodes(where, route.operation.operationId, status, parsed))
  }
  return problems
}

const listedSets = new Map<string, Set<string>>()
function listedSet(operationId: string, status: string): Set<string> {
  let set = listedSets.get(`${operationId} ${status}`)
  if (!set) {
    set = new Set((listedCodes.get(operationId)?.get(status) ?? []).map((e) => `${e.code} ${e.key}`))
    listedSets.set(`${operationId} ${status}`, set)
  }
  return set
}

/** Codes in an error body that the operation's documentation does not list for this status. */
export function unlistedCodes(where: string, operationId: string, status: number, body: any): string[] {
  if (status < 400 || body === null || typeof body !== 'object') return []
  const listed = listedSet(operationId, String(status))
  const found = Array.isArray(body.errors) ? body.errors : [body]
  return found
    .filter((e: any) => typeof e?.code === 'string' && !listed.has(`${e.code} ${e.key}`))
    .map((e: any) => `${where}: ${e.code} ${e.key} is not listed for ${operationId} in x-error-catalogue`)
}

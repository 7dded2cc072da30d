// Fastify validator compiler: request bodies use the generated standalone validators (strict:
// no coercion, no stripping); path, query and headers use a coercing Ajv, as HTTP sends strings.
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import type { FastifySchemaCompiler } from 'fastify'
import * as validators from '../../generated/validators.cjs'
import { operations } from '../../generated/operations.js'
import { addProjectFormats } from './formats.js'
import { boundedBodyValidator } from './body-validator.js'
import { withInputRules } from './parameter-rules.js'

const bodyValidatorByRoute = new Map<string, unknown>(
  Object.values(operations)
    .filter((op) => op.bodySchema)
    .map((op) => [
      `${op.method} ${op.url}`,
      boundedBodyValidator(op.bodySchema!, (validators as unknown as Record<string, never>)[op.bodySchema!]!),
    ]),
)

interface HeaderSchema {
  properties?: Record<string, unknown>
  required?: string[]
}

// Node lowercases incoming header names; Fastify only adapts header schemas for its own
// compiler, so a custom compiler has to do it (glue emits a flat object schema).
function lowerCaseHeaderNames(schema: HeaderSchema): HeaderSchema {
  return {
    ...schema,
    properties: schema.properties && Object.fromEntries(Object.entries(schema.properties).map(([k, v]) => [k.toLowerCase(), v])),
    required: schema.required?.map((k) => k.toLowerCase()),
  }
}

export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const common = { allErrors: true, verbose: true, strict: true, allowUnionTypes: true } as const
  const paramsAjv = new Ajv2020({ ...common, coerceTypes: 'array', useDefaults: true })
  const bodyAjv = new Ajv2020({ ...common, coerceTypes: false, useDefaults: false, removeAdditional: false })
  for (const ajv of [paramsAjv, bodyAjv]) {
    addFormats.default(ajv)
    addProjectFormats(ajv)
  }
  return ({ schema, method, url, httpPart }) => {
    if (httpPart === 'body') {
      const generated = bodyValidatorByRoute.get(`${method} ${url}`)
      return (generated ?? bodyAjv.compile(schema as object)) as ReturnType<FastifySchemaCompiler<unknown>>
    }
    const target = httpPart === 'headers' ? lowerCaseHeaderNames(schema as HeaderSchema) : schema
    return withInputRules(paramsAjv.compile(target as object), target as object, httpPart as 'params' | 'querystring' | 'headers') as ReturnType<FastifySchemaCompiler<unknown>>
  }
}

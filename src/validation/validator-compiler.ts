// Validator compilers for the operations of the contract (installed per route by the request pipeline).
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import type { FastifySchemaCompiler } from 'fastify'
import * as validators from '../../generated/validators.cjs'
import { operations, type OperationId, type OperationInfo } from '../../generated/operations.js'
import { addProjectFormats } from './formats.js'
import { boundedBodyValidator, type Validator as AjvValidator } from './body-validator.js'
import { withInputRules } from './parameter-rules.js'

type Validator = ReturnType<FastifySchemaCompiler<unknown>>

/** The generated body validator of an operation, bounded (container guard, JSON size limits); a miss is a start-up error. */
function bodyValidatorOf(operationId: OperationId): Validator {
  const schemaName = (operations as Record<string, OperationInfo>)[operationId]?.bodySchema
  const generated = schemaName
    ? (validators as unknown as Record<string, AjvValidator | undefined>)[schemaName]
    : undefined
  if (!schemaName || !generated) {
    throw new Error(
      `operation ${operationId} has a request body but generated/validators.cjs has no validator for it: run make generate`,
    )
  }
  return boundedBodyValidator(schemaName, generated) as Validator
}

interface HeaderSchema {
  properties?: Record<string, unknown>
  required?: string[]
}

// Node lowercases incoming header names; Fastify only adapts header schemas for its own
// compiler, so a custom compiler has to do it (glue emits a flat object schema).
function lowerCaseHeaderNames(schema: HeaderSchema): HeaderSchema {
  return {
    ...schema,
    properties:
      schema.properties && Object.fromEntries(Object.entries(schema.properties).map(([k, v]) => [k.toLowerCase(), v])),
    required: schema.required?.map((k) => k.toLowerCase()),
  }
}

/**
 * The validator compiler of one operation's route (installed by the request pipeline): bodies
 * use the operation's generated standalone validator (strict: no coercion, no stripping); path,
 * query and headers a coercing Ajv, as HTTP sends strings.
 */
export function createRouteValidatorCompiler(): (operationId: OperationId) => FastifySchemaCompiler<unknown> {
  const paramsAjv = new Ajv2020({
    allErrors: true,
    verbose: true,
    strict: true,
    allowUnionTypes: true,
    coerceTypes: 'array',
    useDefaults: true,
  })
  addFormats.default(paramsAjv)
  addProjectFormats(paramsAjv)
  return (operationId) =>
    ({ schema, httpPart }) => {
      if (httpPart === 'body') return bodyValidatorOf(operationId)
      const target = httpPart === 'headers' ? lowerCaseHeaderNames(schema as HeaderSchema) : schema
      return withInputRules(
        paramsAjv.compile(target as object),
        target as object,
        httpPart as 'params' | 'querystring' | 'headers',
      ) as Validator
    }
}

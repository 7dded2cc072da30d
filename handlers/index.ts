// The service object bound by fastify-openapi-glue: one method per operationId in the spec.
import { createProbeHandlers } from './probes.js'
import type { HandlerDeps } from './types.js'
import { createUserHandlers } from './users.js'

export function createServiceHandlers(deps: HandlerDeps) {
  return {
    ...createUserHandlers(deps),
    ...createProbeHandlers(deps),
  }
}

export type { HandlerDeps }

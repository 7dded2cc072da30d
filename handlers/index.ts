// The service object bound by fastify-openapi-glue: one method per operationId in the spec.
import { createAdminKeyHandlers } from './admin-keys.js'
import { createConspectusHandlers } from './conspectuses.js'
import { createErrorLogHandlers } from './error-logs.js'
import { createLearnerDataHandlers } from './learner-data.js'
import { createProbeHandlers } from './probes.js'
import { createTelemetryHandlers } from './telemetry.js'
import { createTelemetryAnalyticsHandlers } from './telemetry-analytics.js'
import type { HandlerDeps } from './types.js'
import { createUserHandlers } from './users.js'

export function createServiceHandlers(deps: HandlerDeps) {
  return {
    ...createUserHandlers(deps),
    ...createConspectusHandlers(deps),
    ...createErrorLogHandlers(deps),
    ...createLearnerDataHandlers(deps),
    ...createTelemetryHandlers(deps),
    ...createTelemetryAnalyticsHandlers(deps),
    ...createAdminKeyHandlers(deps),
    ...createProbeHandlers(deps),
  }
}

export type { HandlerDeps }

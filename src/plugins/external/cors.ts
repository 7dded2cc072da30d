import fp from 'fastify-plugin'
import cors from '@fastify/cors'
import { operations } from '../../../generated/operations.js'

// Browsers on the docs site send telemetry cross-origin; nothing else is open to CORS.
const INGEST_PATHS = new Set<string>([
  operations.ingestDocsSearchEvent.path,
  operations.ingestDocsSearchEventBatch.path,
])

/** CORS (preflight included) for the telemetry ingest routes, from the origins in CORS_ORIGINS. */
export default fp(
  async (fastify) => {
    const origins = fastify.config.corsOrigins
    if (origins.length === 0) return
    const ingest = {
      origin: origins,
      methods: ['POST'],
      allowedHeaders: ['X-API-Key', 'Content-Type', 'X-Request-Id'],
      exposedHeaders: [
        'X-Request-Id',
        'X-RateLimit-Limit',
        'X-RateLimit-Remaining',
        'X-RateLimit-Reset',
        'RateLimit',
        'RateLimit-Policy',
        'Retry-After',
      ],
      maxAge: 600,
    }
    await fastify.register(cors, {
      delegator: (request, callback) => {
        const path = request.url.split('?')[0]!
        // Without Origin it is not a browser's request: OPTIONS then gets the plain 204 + Allow.
        callback(null, INGEST_PATHS.has(path) && request.headers.origin !== undefined ? ingest : { origin: false })
      },
    })
  },
  { name: 'cors', dependencies: ['config'] },
)

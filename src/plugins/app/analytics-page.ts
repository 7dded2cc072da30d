import { readFileSync } from 'node:fs'
import path from 'node:path'
import fp from 'fastify-plugin'
import { projectRoot } from '../../paths.js'

// Only our own files: no inline script or style, no other origin. The API calls go to 'self'.
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ')

// Every file the page serves, read once at start: its URL, its file and its type.
const FILES: [url: string, file: string, type: string][] = [
  ['/analytics', 'web/analytics/index.html', 'text/html; charset=utf-8'],
  ['/analytics/app.js', 'web/analytics/app.js', 'text/javascript; charset=utf-8'],
  ['/analytics/app.css', 'web/analytics/app.css', 'text/css; charset=utf-8'],
  ['/analytics/uplot.iife.min.js', 'node_modules/uplot/dist/uPlot.iife.min.js', 'text/javascript; charset=utf-8'],
  ['/analytics/uplot.min.css', 'node_modules/uplot/dist/uPlot.min.css', 'text/css; charset=utf-8'],
]

/**
 * The docs team's analytics page at /analytics: static files of ours and uPlot's (packaged, no
 * CDN). It holds no data; the page asks for an API key with telemetry:read and calls the API.
 */
export default fp(
  async (fastify) => {
    for (const [url, file, type] of FILES) {
      const body = readFileSync(path.join(projectRoot, file))
      fastify.get(url, { schema: { hide: true } }, async (_request, reply) =>
        reply
          .header('content-type', type)
          .header('content-security-policy', CSP)
          .header('x-content-type-options', 'nosniff')
          .header('cache-control', 'no-cache')
          .send(body),
      )
    }
  },
  { name: 'analytics-page' },
)

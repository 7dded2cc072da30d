import type { FastifyRequest } from 'fastify'

const templates = new Map<string, string>()

/**
 * The request's route in the contract's OpenAPI form (`/api/v1/user/{system_uuid}/{system_user_id}`),
 * never the concrete path: the one notation of logs and metrics. `unmatched` for a 404 route.
 */
export function routeTemplate(request: FastifyRequest): string {
  const url = request.routeOptions.url
  if (!url) return 'unmatched'
  let template = templates.get(url)
  if (template === undefined) {
    template = openApiTemplate(url)
    templates.set(url, template)
  }
  return template
}

/** A Fastify route URL in the contract's OpenAPI form (`:name` -> `{name}`). */
export const openApiTemplate = (url: string): string => url.replace(/:(\w+)/g, '{$1}')

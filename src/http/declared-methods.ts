// Which methods the contract declares on a concrete path, for 405 answers and OPTIONS.
import { operations, type OperationInfo } from '../../generated/operations.js'

interface DeclaredPath {
  pattern: RegExp
  methods: Set<string>
}

const byTemplate = new Map<string, DeclaredPath>()
for (const op of Object.values(operations as Record<string, OperationInfo>)) {
  let declared = byTemplate.get(op.path)
  if (!declared) {
    // A parameter matches one non-empty segment, as the router does.
    declared = {
      pattern: new RegExp(`^${op.path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{\w+\}/g, '[^/]+')}$`),
      methods: new Set(),
    }
    byTemplate.set(op.path, declared)
  }
  declared.methods.add(op.method)
}
const declaredPaths = [...byTemplate.values()]

/** GET routes outside the contract (the /docs pages, the analytics page), by their route pattern. */
const servedPages = new Map<string, RegExp>()

/**
 * Records a GET route the app serves outside the contract, in the router's syntax (`:name` a
 * segment, `*` the rest), so that its path answers other methods, HEAD included, as a declared
 * path does: 405 with Allow.
 */
export function declareServedPage(url: string): void {
  if (servedPages.has(url)) return
  const pattern = url
    .split(/(:\w+|\*)/)
    .map((part) => (part === '*' ? '.*' : part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^$()|[\]\\{}]/g, '\\$&')))
    .join('')
  servedPages.set(url, new RegExp(`^${pattern}$`))
}
const METHOD_ORDER = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']

/**
 * The `Allow` value for a path: every method any matching template declares, plus OPTIONS;
 * null when no template matches (the path does not exist).
 */
export function allowedMethods(path: string): string | null {
  const methods = new Set<string>()
  for (const declared of declaredPaths)
    if (declared.pattern.test(path)) for (const m of declared.methods) methods.add(m)
  if (methods.size === 0 && [...servedPages.values()].some((page) => page.test(path))) methods.add('GET')
  if (methods.size === 0) return null
  methods.add('OPTIONS')
  return METHOD_ORDER.filter((m) => methods.has(m)).join(', ')
}

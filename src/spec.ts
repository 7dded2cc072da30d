// spec/openapi.yaml as an object, parsed once per process: the docs plugin, the route binding and
// the tests' contract checks all start from it, and parsing its 120 KB of YAML costs more than the
// rest of building the app (a test process builds the app several times).
import { readFileSync } from 'node:fs'
import { parse } from 'yaml'
import type { OpenApiNode } from './docs/operation-errors.js'
import { specPath } from './paths.js'

let cached: { text: string; document: OpenApiNode } | undefined

/** A fresh copy of spec/openapi.yaml (the caller may change it); parsed again only when the file changed. */
export function readSpec(): OpenApiNode {
  const text = readFileSync(specPath, 'utf8')
  if (cached?.text !== text) cached = { text, document: parse(text) }
  return structuredClone(cached.document)
}

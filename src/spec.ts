// The API document (spec/openapi.yaml) as an object, for the docs plugin, the route binding and the
// tests' contract checks. Read from its JSON copy in generated/ (`make generate` writes it, CI fails
// when it is stale): parsing 120 KB of YAML would cost every process a third of a second.
import { readFileSync } from 'node:fs'
import type { OpenApiNode } from './docs/operation-errors.js'

// Beside this module's folder in both layouts: src/ → generated/, dist/src/ → dist/generated/.
const specJson = new URL('../generated/openapi.json', import.meta.url)

/** A fresh copy of the API document (the caller may change it). */
export function readSpec(): OpenApiNode {
  return JSON.parse(readFileSync(specJson, 'utf8'))
}

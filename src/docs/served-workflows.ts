// The Arazzo workflows served at /arazzo.yaml: spec/workflows.arazzo.yaml as written (its
// comments say what the runner cannot express), with its OpenAPI source description pointed at the
// document served beside it, `./openapi.json`, instead of the repository's `./openapi.yaml`.
// Only that value's text is replaced, so the served file reads like the one in the repository.
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { isScalar, parseDocument } from 'yaml'
import { projectRoot } from '../paths.js'

export const workflowsPath = path.join(projectRoot, 'spec/workflows.arazzo.yaml')

/** The source description's URL in the repository, and the one it is served with. */
export const REPOSITORY_SOURCE = './openapi.yaml'
export const SERVED_SOURCE = './openapi.json'

export function buildServedWorkflows(text: string): string {
  const doc = parseDocument(text)
  if (doc.errors.length > 0) throw new Error(`spec/workflows.arazzo.yaml: ${doc.errors[0]!.message}`)
  const sources = doc.toJS().sourceDescriptions as { url: string; type?: string }[] | undefined
  const index = sources?.findIndex((s) => s.type === 'openapi' && s.url === REPOSITORY_SOURCE) ?? -1
  const url = index >= 0 ? doc.getIn(['sourceDescriptions', index, 'url'], true) : undefined
  if (!isScalar(url) || !url.range)
    throw new Error(`spec/workflows.arazzo.yaml: no OpenAPI source description with url ${REPOSITORY_SOURCE}`)
  const [start, end] = url.range
  return `${text.slice(0, start)}${SERVED_SOURCE}${text.slice(end)}`
}

/** Read at start: a broken file stops the service instead of serving nothing. */
export function readServedWorkflows(): string {
  return buildServedWorkflows(readFileSync(workflowsPath, 'utf8'))
}

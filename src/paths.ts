// Project-relative paths that work both from src/ (tsx, tests) and from dist/ (compiled).
import { existsSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

function findRoot(start: string): string {
  let dir = start
  while (!existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir)
    if (parent === dir) throw new Error(`package.json not found above ${start}`)
    dir = parent
  }
  return dir
}

export const projectRoot = findRoot(path.dirname(fileURLToPath(import.meta.url)))
export const specPath = path.join(projectRoot, 'spec/openapi.yaml')
export const migrationsDir = path.join(projectRoot, 'db/migrations')

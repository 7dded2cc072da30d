// .dockerignore's rules as Docker applies them (@balena/dockerignore implements Docker's matching).
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { projectRoot } from '../../src/paths.js'

// A CommonJS module whose types declare an ES default export: loaded as CommonJS, it is the factory.
const ignore: typeof import('@balena/dockerignore').default = createRequire(import.meta.url)('@balena/dockerignore')

/** The patterns of .dockerignore, comments and blank lines left out. */
export const dockerignorePatterns = (): string[] =>
  readFileSync(path.join(projectRoot, '.dockerignore'), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))

/** Whether Docker leaves this path (relative to the context's root) out of the build context. */
export function dockerExcludes(): (relative: string) => boolean {
  const rules = ignore().add(dockerignorePatterns())
  return (relative) => rules.ignores(relative)
}

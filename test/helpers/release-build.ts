// A previous release built from its commit (releases.json), for upgrade tests: `git archive` of
// the commit into a temporary folder, `npm ci`, `npm run build`. Cached under the system's temp
// folder keyed by commit, so a second run starts at once.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { projectRoot } from '../../src/paths.js'
import { childEnv, untracked } from './child-env.js'

export interface Release {
  version: string
  commit: string
}

/** The releases of releases.json, oldest first. */
export function releases(): Release[] {
  return JSON.parse(readFileSync(path.join(projectRoot, 'releases.json'), 'utf8')).releases
}

/** The folder of a built release: `node dist/src/server.js` there starts it. */
export function buildRelease(commit: string, log: (line: string) => void = () => {}): string {
  const dir = path.join(os.tmpdir(), `study-service-release-${commit}`)
  if (existsSync(path.join(dir, 'dist/src/server.js'))) return dir
  const work = `${dir}.building-${process.pid}`
  rmSync(work, { recursive: true, force: true })
  mkdirSync(work, { recursive: true })
  const run = (cmd: string, args: string[], cwd: string) => {
    log(`${cmd} ${args.join(' ')}`)
    const env = childEnv()
    execFileSync(...untracked(cmd, args, env), {
      cwd,
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
      maxBuffer: 64 * 1024 * 1024,
    })
  }
  try {
    execFileSync('sh', ['-c', `git -C "${projectRoot}" archive --format=tar ${commit} | tar -x -C "${work}"`])
    run('npm', ['ci', '--no-audit', '--no-fund', '--prefer-offline'], work)
    run('npm', ['run', 'build'], work)
    // Published whole or not at all: a half-built folder is never taken for a build.
    rmSync(dir, { recursive: true, force: true })
    renameSync(work, dir)
  } catch (err) {
    rmSync(work, { recursive: true, force: true })
    throw err
  }
  return dir
}

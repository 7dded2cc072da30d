// A previous release built from its commit (releases.json), for upgrade tests, as the Dockerfile
// builds its image: `git archive` of the commit into a temporary folder, its production
// dependencies (`npm ci --omit=dev`, the image's node_modules) and `npm run build` with the
// TypeScript its lock names (this tree's when the same, as it usually is; the linters, test
// tools and browsers of a full install are not needed to run it). Cached under the system's temp
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
  const run = (cmd: string, args: string[], cwd: string, extra: NodeJS.ProcessEnv = {}) => {
    log(`${cmd} ${args.join(' ')}`)
    const env = childEnv(extra)
    execFileSync(...untracked(cmd, args, env), {
      cwd,
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
      maxBuffer: 64 * 1024 * 1024,
    })
  }
  try {
    execFileSync('sh', ['-c', `git -C "${projectRoot}" archive --format=tar ${commit} | tar -x -C "${work}"`])
    run('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline'], work)
    const tsc = typescriptBin(lockedTypescript(work), run)
    run('npm', ['run', 'build'], work, { PATH: `${tsc}${path.delimiter}${process.env.PATH}` })
    // Published whole or not at all: a half-built folder is never taken for a build.
    rmSync(dir, { recursive: true, force: true })
    renameSync(work, dir)
  } catch (err) {
    rmSync(work, { recursive: true, force: true })
    throw err
  }
  return dir
}

/** The TypeScript version a checkout's package-lock.json names. */
function lockedTypescript(dir: string): string {
  const lock = JSON.parse(readFileSync(path.join(dir, 'package-lock.json'), 'utf8'))
  const version = lock.packages?.['node_modules/typescript']?.version
  if (typeof version !== 'string') throw new Error(`${dir}/package-lock.json names no typescript`)
  return version
}

/** A folder holding `tsc` of that version: this tree's, else one installed once beside the builds. */
function typescriptBin(version: string, run: (cmd: string, args: string[], cwd: string) => void): string {
  const own = path.join(projectRoot, 'node_modules')
  if (JSON.parse(readFileSync(path.join(own, 'typescript/package.json'), 'utf8')).version === version)
    return path.join(own, '.bin')
  const dir = path.join(os.tmpdir(), `study-service-typescript-${version}`)
  const bin = path.join(dir, 'node_modules/.bin')
  if (existsSync(path.join(bin, 'tsc'))) return bin
  const work = `${dir}.installing-${process.pid}`
  try {
    run(
      'npm',
      ['install', '--prefix', work, '--no-save', '--no-audit', '--no-fund', `typescript@${version}`],
      projectRoot,
    )
    rmSync(dir, { recursive: true, force: true })
    renameSync(work, dir)
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
  return bin
}

// Runs the real server (src/server.ts, as transpiled for the tests) as a child process, for signal and crash tests.
import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'
import { projectRoot } from '../../src/paths.js'
import { childEnv, untracked } from './child-env.js'

export interface ServerProcess {
  base: string
  child: ChildProcess
  exited: Promise<number | null>
  output: () => string
}

/**
 * The server as the tests run it: src/server.ts transpiled with the tests (tools/build-tests.mjs),
 * so a test's server starts without a TypeScript loader of its own.
 */
export const SERVER_SCRIPT = fileURLToPath(new URL('../../src/server.js', import.meta.url))

/** A port nobody listens on right now (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number }
      probe.close(() => resolve(port))
    })
  })
}

export interface ServerBuild {
  /** The folder to run in (default: this working tree). */
  cwd?: string
  /** Node's arguments (default: this tree's server, SERVER_SCRIPT). */
  args?: string[]
}

export async function startServer(
  t: Test,
  env: Record<string, string>,
  build: ServerBuild = {},
): Promise<ServerProcess> {
  const port = env.PORT ?? String(await freePort())
  // Load shedding off unless a test sets it: a busy CI machine must not turn into 503s here.
  const childEnvironment = childEnv({
    LOG_LEVEL: 'warn',
    API_KEYS: 'k',
    LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0',
    // Several test files start replicas at once on one PostgreSQL (max_connections 100).
    DATABASE_POOL_MAX: '4',
    ...env,
    PORT: port,
    HOST: '127.0.0.1',
  })
  const child = spawn(...untracked(process.execPath, build.args ?? [SERVER_SCRIPT], childEnvironment), {
    cwd: build.cwd ?? projectRoot,
    env: childEnvironment,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let log = ''
  child.stdout!.on('data', (d) => (log += d))
  child.stderr!.on('data', (d) => (log += d))
  // 'close', not 'exit': by then stdout and stderr are drained, so output() holds the last lines.
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  const base = `http://127.0.0.1:${port}`
  // Generous: a loaded 2-core CI machine can take many seconds to load TypeScript sources.
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`server exited early: ${log}`)
    try {
      if ((await fetch(`${base}/live`)).ok) return { base, child, exited, output: () => log }
    } catch {
      // not listening yet
    }
    await sleep(100)
  }
  throw new Error(`server did not start: ${log}`)
}

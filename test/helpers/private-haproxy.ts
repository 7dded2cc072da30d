// A private HAProxy (Debian's package) on a free port, running deploy/haproxy.cfg in front of
// the given replicas, stopped by the test that started it.
import { spawn, spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Test } from 'tap'
import { projectRoot } from '../../src/paths.js'
import { freePort } from './server-process.js'

export const HAPROXY_CONFIG = join(projectRoot, 'deploy', 'haproxy.cfg')

export function haproxyEnv(bind: string, replicas: string[], checkInterMs: number): Record<string, string> {
  const env: Record<string, string> = { HAPROXY_BIND: bind, CHECK_INTER_MS: String(checkInterMs) }
  // deploy/haproxy.cfg names three replicas; a missing one points at a closed port (always DOWN).
  for (let i = 0; i < 3; i++) env[`REPLICA_${i + 1}`] = replicas[i] ?? '127.0.0.1:9'
  return env
}

/** `haproxy -c`: the configuration is valid with these variables. */
export function checkHaproxyConfig(env: Record<string, string>): { ok: boolean; output: string } {
  const res = spawnSync('haproxy', ['-c', '-f', HAPROXY_CONFIG], { env: { ...process.env, ...env }, encoding: 'utf8' })
  return { ok: res.status === 0, output: `${res.stdout}${res.stderr}` }
}

export interface PrivateHaproxy {
  base: string
  output: () => string
}

export async function startPrivateHaproxy(t: Test, replicas: string[], checkInterMs = 200): Promise<PrivateHaproxy> {
  const port = await freePort()
  const child = spawn('haproxy', ['-db', '-f', HAPROXY_CONFIG], {
    env: { ...process.env, ...haproxyEnv(`127.0.0.1:${port}`, replicas, checkInterMs) },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let log = ''
  child.stdout!.on('data', (d) => (log += d))
  child.stderr!.on('data', (d) => (log += d))
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  const base = `http://127.0.0.1:${port}`
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`haproxy exited: ${log}`)
    try {
      if ((await fetch(`${base}/ready`)).ok) return { base, output: () => log }
    } catch {
      // not listening yet
    }
    await sleep(100)
  }
  throw new Error(`haproxy did not start: ${log}`)
}

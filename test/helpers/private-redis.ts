// A private redis-server on its own port (never the shared one on 6379), stopped by the test
// that started it. It can be stopped, paused (a slow Redis) and started again on the same port.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { createConnection } from 'node:net'
import type { Test } from 'tap'
import { freePort } from './server-process.js'

export interface PrivateRedis {
  port: number
  url: string
  /** Stops the server (SIGTERM) and waits for it to exit. */
  stop(): Promise<void>
  /** Starts it again on the same port, empty. */
  start(): Promise<void>
  /** SIGSTOP / SIGCONT: the server keeps its connections but answers nothing. */
  pause(): void
  resume(): void
}

function pingOnce(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port })
    socket.setTimeout(500, () => socket.destroy())
    socket.once('error', () => resolve(false))
    socket.once('close', () => resolve(false))
    socket.once('connect', () => socket.write('PING\r\n'))
    socket.once('data', (d) => {
      resolve(d.toString().startsWith('+PONG'))
      socket.destroy()
    })
  })
}

export async function startPrivateRedis(t: Test): Promise<PrivateRedis> {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'redis-'))
  let child: ChildProcess | undefined
  const start = async () => {
    const proc = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
        '--maxmemory-policy',
        'noeviction',
      ],
      {
        stdio: 'ignore',
      },
    )
    child = proc
    for (let i = 0; i < 100; i++) {
      if (proc.exitCode !== null) throw new Error(`redis-server exited with ${proc.exitCode}`)
      if (await pingOnce(port)) return
      await sleep(50)
    }
    throw new Error('redis-server did not answer PING')
  }
  const stop = async () => {
    const proc = child
    child = undefined
    if (!proc || proc.exitCode !== null) return
    const exited = new Promise((r) => proc.once('exit', r))
    proc.kill('SIGCONT')
    proc.kill('SIGTERM')
    await exited
  }
  await start()
  t.teardown(async () => {
    await stop()
    rmSync(dir, { recursive: true, force: true })
  })
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    stop,
    start,
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
  }
}

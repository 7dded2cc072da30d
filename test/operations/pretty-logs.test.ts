// On a terminal (stdout a TTY, as in `make run`) the real server writes pino-pretty's lines.
import t from 'tap'
import { execFileSync, spawn } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import { projectRoot } from '../../src/paths.js'
import { createTestDatabase } from '../helpers/database.js'
import { freePort, SERVER_SCRIPT } from '../helpers/server-process.js'
import { childEnv, untracked } from '../helpers/child-env.js'

t.test('pino-pretty lines on a terminal', async (t) => {
  const db = await createTestDatabase(t)
  const port = String(await freePort())
  // util-linux `script` gives the server a pseudo-terminal as stdout.
  const env = childEnv({
    DATABASE_URL: db.url,
    API_KEYS: 'k',
    LOG_LEVEL: 'info',
    SHUTDOWN_DRAIN_MS: '0',
    PORT: port,
    HOST: '127.0.0.1',
  })
  const child = spawn(...untracked('script', ['-qfec', `${process.execPath} ${SERVER_SCRIPT}`, '/dev/null'], env), {
    cwd: projectRoot,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  let output = ''
  child.stdout!.on('data', (d) => (output += d))
  const exited = new Promise((resolve) => child.on('close', resolve)) // after stdout is drained
  t.teardown(() => {
    if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL')
  })
  for (let i = 0; i < 600 && !output.includes('request completed'); i++) {
    await fetch(`http://127.0.0.1:${port}/live`)
      .then((r) => r.arrayBuffer())
      .catch(() => {})
    await sleep(100)
  }
  // Signal the server alone: `script` must keep the terminal open for its last line.
  const pid = serverPid(child.pid!)
  t.ok(pid > 0, 'the server process is found')
  if (pid > 0) process.kill(pid, 'SIGTERM')
  await exited
  t.match(output, /INFO.*request completed/, 'a level name, not a JSON field')
  t.match(output, /route: "\/live"/, 'fields on their own lines')
  t.match(output, /INFO.*stopped/)
  t.notMatch(output, /\{"level":/, 'no JSON line')
})

/** The pid of the node process running the server under `root` (script, then maybe a shell). */
function serverPid(root: number): number {
  let children: string[]
  try {
    children = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(root)], { encoding: 'utf8' })
      .trim()
      .split('\n')
  } catch {
    return 0 // ps exits 1 when the process has no children
  }
  for (const line of children) {
    const [pid, ...args] = line.trim().split(/\s+/)
    if (args.join(' ').includes(SERVER_SCRIPT) && args[0] === process.execPath) return Number(pid)
    const below = serverPid(Number(pid))
    if (below) return below
  }
  return 0
}

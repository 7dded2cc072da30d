// The real server's own lines on a pipe: JSON, ending with `stopped` once shutdown has finished.
// (On a terminal: pretty-logs.test.ts.)
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { childEnv, untracked } from '../helpers/child-env.js'
import { createTestDatabase } from '../helpers/database.js'
import { startServer } from '../helpers/server-process.js'

t.test('JSON lines on a pipe, ending with "stopped" after SIGTERM', async (t) => {
  const db = await createTestDatabase(t)
  const server = await startServer(t, { DATABASE_URL: db.url, LOG_LEVEL: 'info', SHUTDOWN_DRAIN_MS: '0' })
  await (await fetch(`${server.base}/live`)).arrayBuffer()
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
  const lines = server
    .output()
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>)
  t.match(
    lines.find((l) => l.msg === 'request completed'),
    { route: '/live', status: 200 },
  )
  t.match(lines.at(-1), { level: 30, msg: 'stopped', signal: 'SIGTERM' }, 'the last line says the server has stopped')
})

// Every server, tool and shell a test starts comes through untracked(): under tap, a Node.js
// process spawned any other way loads tap's process tracker too.
t.test('a process a test starts loads no tap process tracker', async (t) => {
  const env = childEnv()
  const loaded = execFileSync(
    ...untracked(process.execPath, ['-p', '[...process.execArgv, process.env.NODE_OPTIONS ?? ""].join(" ")'], env),
    { env, encoding: 'utf8' },
  )
  t.notMatch(loaded, /processinfo/)
})

// `make smoke-node`: the BUILT server (dist/, as in the Docker image) on a given Node.js binary
// (the machine's own: the tests run on the image's), against a fresh PostgreSQL database: start
// it, check /ready, create a user, read it.
// Usage: tsx tools/smoke-node.ts <path to node>
import { spawn, execFileSync } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { projectRoot } from '../src/paths.js'
import { ADMIN_URL, databaseUrl } from '../test/helpers/database.js'
import { freePort } from '../test/helpers/server-process.js'

const node = process.argv[2]
if (!node) throw new Error('usage: tsx tools/smoke-node.ts <node binary>')
const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim()

const name = `smoke_${randomBytes(3).toString('hex')}`
const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
await admin.unsafe(`create database "${name}"`)
const port = await freePort()
// Migrations run at start (src/server.ts), so the fresh database is all it needs.
const server = spawn(node, ['dist/src/server.js'], {
  cwd: projectRoot,
  env: {
    ...process.env,
    DATABASE_URL: databaseUrl(name),
    API_KEYS: 'smoke',
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    NODE_ENV: 'production',
  },
  stdio: ['ignore', 'pipe', 'pipe'],
})
let log = ''
server.stdout.on('data', (d) => (log += d))
server.stderr.on('data', (d) => (log += d))

const base = `http://127.0.0.1:${port}`
const step = (label: string, ok: boolean, detail = '') => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${label}${detail ? `: ${detail}` : ''}`)
  if (!ok) process.exitCode = 1
}
try {
  let ready: Response | undefined
  for (let i = 0; i < 300 && server.exitCode === null; i++) {
    ready = await fetch(`${base}/ready`).catch(() => undefined)
    if (ready?.ok) break
    await sleep(100)
  }
  step(`server on Node ${version} is ready`, ready?.ok === true, ready ? String(ready.status) : log.slice(0, 500))
  const user = { system_user_id: 'smoke', system_uuid: randomUUID(), full_name: 'Smoke Test' }
  const created = await fetch(`${base}/api/v1/user`, {
    method: 'POST',
    headers: { 'x-api-key': 'smoke', 'content-type': 'application/json', 'idempotency-key': randomUUID() },
    body: JSON.stringify(user),
  })
  step('create a user', created.status === 201, String(created.status))
  const read = await fetch(`${base}/api/v1/user/${user.system_uuid}/smoke`, { headers: { 'x-api-key': 'smoke' } })
  const body = (await read.json()) as { full_name?: string }
  step('read it back', read.status === 200 && body.full_name === 'Smoke Test', String(read.status))
  step('no warning or error logged', !/"level":(40|50|60)/.test(log), log.slice(0, 500))
} finally {
  server.kill('SIGTERM')
  await new Promise((r) => server.once('exit', r))
  await admin.unsafe(`drop database if exists "${name}" with (force)`)
  await admin.end()
}

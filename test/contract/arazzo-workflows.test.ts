// The partner journeys (spec/workflows.arazzo.yaml, served at /arazzo.yaml) run by Redocly
// Respect against the real server on PostgreSQL, with the README's command as written (the
// server's URL as BASE): every workflow passes, and a workflow whose check fails fails the command.
import t from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { stripVTControlCharacters } from 'node:util'
import { parse } from 'yaml'
import { projectRoot } from '../../src/paths.js'
import { workflowsPath } from '../../src/docs/served-workflows.js'
import { createTestDatabase } from '../helpers/database.js'
import { startServer } from '../helpers/server-process.js'
import { childEnv, untracked } from '../helpers/child-env.js'

const readme = readFileSync(path.join(projectRoot, 'README.md'), 'utf8')
const command = /<!-- arazzo-workflows[^>]*-->\s*```shell\n([\s\S]*?)```/.exec(readme)?.[1]
const workflowIds = (parse(readFileSync(workflowsPath, 'utf8')).workflows as { workflowId: string }[]).map(
  (w) => w.workflowId,
)
const redoclyVersion = JSON.parse(readFileSync(path.join(projectRoot, 'package.json'), 'utf8')).devDependencies[
  '@redocly/cli'
] as string
const KEY = 'arazzo-full-access'
const SYSTEM = '3f2c2f57-9d55-4a0b-8a3c-1c1f5b2f4e10'

/** Respect's report without its colours. */
const plain = (text: string) => stripVTControlCharacters(text)

function bash(script: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(...untracked('bash', ['--noprofile', '--norc', '-c', script], env), {
      cwd: projectRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    child.stdout.on('data', (d) => (output += d))
    child.stderr.on('data', (d) => (output += d))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, output: plain(output) }))
  })
}

/** What to show when a run fails: the failed checks and their reasons, not every request. */
const failures = (output: string) =>
  output
    .split('\n')
    .filter((line) => /✗|Reason|Running workflow|Summary|Workflows:/.test(line))
    .join('\n')

t.test('the README has the command, with the Redocly CLI this repository pins', async (t) => {
  t.ok(command, 'README.md has an arazzo-workflows shell block')
  t.match(command, `npx -y @redocly/cli@${redoclyVersion} respect "$BASE/arazzo.yaml"`)
  t.ok(workflowIds.length >= 5, `${workflowIds.length} workflows`)
})

t.test('every workflow passes against a fresh service; a failed check fails the command', async (t) => {
  const db = await createTestDatabase(t)
  // The analytics rollup every half second, so the analytics steps wait little.
  const server = await startServer(t, {
    DATABASE_URL: db.url,
    API_KEYS: KEY,
    APP_ENV: 'dev',
    ANALYTICS_REFRESH_INTERVAL_MS: '500',
  })
  const env = childEnv({ BASE: server.base, API_KEY: KEY, S: SYSTEM, NO_COLOR: '1' })

  const run = await bash(command!, env)
  t.equal(run.code, 0, 'the command exits 0', { failures: failures(run.output) })
  t.match(run.output, `Workflows: ${workflowIds.length} passed, ${workflowIds.length} total`)
  for (const id of workflowIds) t.match(run.output, `Running workflow arazzo.yaml / ${id}`, `${id} ran`)
  // A retried step prints its failed attempts; the summary counts the checks that decided.
  t.match(run.output, /Checks: (\d+) passed, \1 total/, 'every check passed')

  // The same document with one expectation the service does not meet: the command fails on it.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'arazzo-broken-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const served = await (await fetch(`${server.base}/arazzo.yaml`)).text()
  const broken = served.replace("$response.body#/key == 'USER_NOT_FOUND'", "$response.body#/key == 'USER_GONE'")
  t.not(broken, served, 'the error-paths workflow checks the 404 key')
  writeFileSync(path.join(dir, 'arazzo.yaml'), broken)
  writeFileSync(path.join(dir, 'openapi.json'), await (await fetch(`${server.base}/openapi.json`)).text())
  const failing = await bash(
    command!.replace('"$BASE/arazzo.yaml"', `"${path.join(dir, 'arazzo.yaml')}" --workflow error-paths`),
    env,
  )
  t.not(failing.code, 0, 'the command exits non-zero')
  t.match(failing.output, /✗ GET \/api\/v1\/user\/\{system_uuid\}\/\{system_user_id\} - step read-missing-learner/)
  t.match(failing.output, 'Workflows: 1 failed, 1 total')
})

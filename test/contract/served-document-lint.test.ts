// The served /openapi.json passes the linters partners run on it: Spectral's `spectral:oas` and
// Redocly's recommended rules, with no error (the spec itself is linted by `make lint`).
import t from 'tap'
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { parse } from 'yaml'
import { buildServedDocument } from '../../src/docs/served-document.js'
import { projectRoot, specPath } from '../../src/paths.js'
import { childEnv, untracked } from '../helpers/child-env.js'

const execFileAsync = promisify(execFile)
const env = childEnv()
const run = (command: string, args: string[], options: { cwd?: string; maxBuffer: number }) =>
  execFileAsync(...untracked(command, args, env), { ...options, env })
const dir = mkdtempSync(path.join(tmpdir(), 'served-lint-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const served = path.join(dir, 'openapi.json')
writeFileSync(served, JSON.stringify(buildServedDocument(parse(readFileSync(specPath, 'utf8')))))
const ruleset = path.join(dir, 'oas.yaml')
writeFileSync(ruleset, 'extends: ["spectral:oas"]\n')
const bin = (name: string) => path.join(projectRoot, 'node_modules/.bin', name)

t.test('spectral:oas reports no error on the served document', async (t) => {
  const { stdout } = await run(
    bin('spectral'),
    ['lint', served, '-r', ruleset, '-f', 'json', '--fail-severity=error', '-q'],
    { maxBuffer: 64 << 20 },
  ).catch((e) => e)
  const results = JSON.parse(stdout || '[]') as { severity: number; code: string; path: string[] }[]
  const errors = results.filter((r) => r.severity === 0)
  t.same(
    errors.map((e) => `${e.code} ${e.path.join('.')}`),
    [],
    'no spectral error',
  )
})

t.test('redocly recommended reports no error on the served document', async (t) => {
  const { stdout } = await run(bin('redocly'), ['lint', served, '--extends=recommended', '--format=json'], {
    cwd: dir,
    maxBuffer: 64 << 20,
  }).catch((e) => e)
  const report = JSON.parse(stdout.slice(stdout.indexOf('{'))) as {
    totals: { errors: number }
    problems: { ruleId: string; severity: string; message: string }[]
  }
  t.same(
    report.problems.filter((p) => p.severity === 'error').map((p) => `${p.ruleId}: ${p.message}`),
    [],
  )
  t.equal(report.totals.errors, 0)
})

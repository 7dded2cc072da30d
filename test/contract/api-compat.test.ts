// `make api-compat` (tools/api-compat.sh): the contract against the last released one. It must
// pass for the current spec and fail on a real breaking change unless the major version moves.
import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { parse, stringify } from 'yaml'
import { projectRoot, specPath } from '../../src/paths.js'

// Asynchronous, so that the subtests' diffs run side by side (each takes seconds).
function gate(revision?: string, base?: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const env = base ? { ...process.env, API_COMPAT_BASE: base } : process.env
    const child = spawn(path.join(projectRoot, 'tools/api-compat.sh'), revision ? [revision] : [], { cwd: projectRoot, env })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('exit', (status) => resolve({ status, stdout, stderr }))
  })
}

function revision(t: Test, change: (spec: any) => void): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'api-compat-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const spec = parse(readFileSync(specPath, 'utf8'))
  change(spec)
  const file = path.join(dir, 'openapi.yaml')
  writeFileSync(file, stringify(spec))
  return file
}

const removeClientUuid = (spec: any) => {
  const user = spec.components.schemas.UserResponse
  user.required = user.required.filter((p: string) => p !== 'client_uuid')
  delete user.properties.client_uuid
}

const bumped = (version: string, part: 'major' | 'minor') => {
  const [major, minor] = version.split('.').map(Number) as [number, number]
  return part === 'major' ? `${major + 1}.0.0` : `${major}.${minor + 1}.0`
}

// One test, the four diffs side by side: each redocly run takes seconds on a busy machine. The
// breaking changes are judged against the current contract taken as the released one, so that
// only the change under test moves the version.
t.test('the gate passes the current contract and fails real breaking changes unless the major moves', async (t) => {
  const base = revision(t, () => {})
  const version = parse(readFileSync(specPath, 'utf8')).info.version as string
  const [current, removed, removedWithMajor, newRequired] = await Promise.all([
    gate(),
    gate(
      revision(t, (spec) => {
        removeClientUuid(spec)
        spec.info.version = bumped(version, 'minor')
      }),
      base,
    ),
    gate(
      revision(t, (spec) => {
        removeClientUuid(spec)
        spec.info.version = bumped(version, 'major')
      }),
      base,
    ),
    gate(
      revision(t, (spec) => {
        const body = spec.components.schemas.UserCreateRequest
        body.properties.locale = { type: 'string' }
        body.required.push('locale')
        spec.info.version = bumped(version, 'minor')
      }),
      base,
    ),
  ])
  t.equal(current.status, 0, current.status === 0 ? 'the current contract passes' : current.stdout + current.stderr)
  t.not(removed.status, 0, 'a response property removed (and no longer required) fails')
  t.match(removed.stdout + removed.stderr, 'require a major bump')
  t.equal(removedWithMajor.status, 0, 'the same change with a new major version passes')
  t.not(newRequired.status, 0, 'a new required request field fails')
  t.match(newRequired.stdout + newRequired.stderr, 'require a major bump')
})

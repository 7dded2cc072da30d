// `make api-compat` (tools/api-compat.mjs): the contract against the last released one. It must
// pass for the current spec and fail on a real breaking change unless the major version moves.
import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { parse, stringify } from 'yaml'
import { projectRoot, specPath } from '../../src/paths.js'
import { childEnv, untracked } from '../helpers/child-env.js'

// Asynchronous, so that the subtests' diffs run side by side (each takes seconds).
function gate(revision?: string, releasedDir?: string): Promise<{ status: number | null; out: string }> {
  return new Promise((resolve) => {
    const env = childEnv({ API_COMPAT_REQUIRE_RELEASED: '0' })
    if (releasedDir) env.API_COMPAT_RELEASED_DIR = releasedDir
    const child = spawn(...untracked(path.join(projectRoot, 'tools/api-compat.mjs'), revision ? [revision] : [], env), {
      cwd: projectRoot,
      env,
    })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    child.stderr.on('data', (d) => (out += d))
    child.on('close', (status) => resolve({ status, out })) // 'close': after stdout and stderr are drained
  })
}

function tempDir(t: Test): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'api-compat-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

function revision(t: Test, change: (spec: any) => void): string {
  const spec = parse(readFileSync(specPath, 'utf8'))
  change(spec)
  const file = path.join(tempDir(t), 'openapi.yaml')
  writeFileSync(file, stringify(spec))
  return file
}

const removeClientUuid = (spec: any) => {
  const user = spec.components.schemas.UserResponse
  user.required = user.required.filter((p: string) => p !== 'client_uuid')
  delete user.properties.client_uuid
}

const newRequiredField = (spec: any) => {
  const body = spec.components.schemas.UserCreateRequest
  body.properties.locale = { type: 'string' }
  body.required.push('locale')
}

const bumped = (version: string, part: 'major' | 'minor') => {
  const [major, minor] = version.split('.').map(Number) as [number, number]
  return part === 'major' ? `${major + 1}.0.0` : `${major}.${minor + 1}.0`
}

t.test('what main serves is released: the spec equals its released copy', async (t) => {
  const version = parse(readFileSync(specPath, 'utf8')).info.version as string
  t.equal(
    readFileSync(path.join(projectRoot, `spec/released/openapi-${version}.yaml`), 'utf8'),
    readFileSync(specPath, 'utf8'),
  )
  const current = await gate()
  t.equal(current.status, 0, current.out)
})

// The breaking changes are judged against the current contract taken as the released one (a
// released folder of its own), so that only the change under test moves the version.
t.test('the gate fails a change without a version move, and breaking changes unless the major moves', async (t) => {
  const released = tempDir(t)
  const version = parse(readFileSync(specPath, 'utf8')).info.version as string
  writeFileSync(path.join(released, `openapi-${version}.yaml`), readFileSync(specPath))
  const edited = revision(t, (spec) => {
    spec.info.description += '\nOne more sentence.'
  })
  const removedMajor = revision(t, (spec) => {
    removeClientUuid(spec)
    spec.info.version = bumped(version, 'major')
  })
  const [unchanged, notMoved, removed, newRequired, removedWithMajor] = await Promise.all([
    gate(specPath, released),
    gate(edited, released),
    gate(
      revision(t, (spec) => {
        removeClientUuid(spec)
        spec.info.version = bumped(version, 'minor')
      }),
      released,
    ),
    gate(
      revision(t, (spec) => {
        newRequiredField(spec)
        spec.info.version = bumped(version, 'minor')
      }),
      released,
    ),
    gate(removedMajor, released),
  ])
  t.equal(unchanged.status, 0, unchanged.out)
  t.not(notMoved.status, 0, 'an edit without a version move fails')
  t.match(notMoved.out, 'version not moved')
  t.not(removed.status, 0, 'a response property removed (and no longer required) fails')
  t.match(removed.out, 'require a major bump')
  t.not(newRequired.status, 0, 'a new required request field fails')
  t.match(newRequired.out, 'require a major bump')
  t.equal(removedWithMajor.status, 0, `the same removal with a new major version passes: ${removedWithMajor.out}`)

  // Released: the new major becomes the base; it passes unchanged, and the old spec is now lower.
  writeFileSync(path.join(released, `openapi-${bumped(version, 'major')}.yaml`), readFileSync(removedMajor))
  const [releasedMajor, older, mainUnreleased] = await Promise.all([
    gate(removedMajor, released),
    gate(specPath, released),
    new Promise<{ status: number | null; out: string }>((resolve) => {
      const file = revision(t, (spec) => {
        removeClientUuid(spec)
        spec.info.version = bumped(bumped(version, 'major'), 'minor')
      })
      const env = childEnv({ API_COMPAT_RELEASED_DIR: released, API_COMPAT_REQUIRE_RELEASED: '1' })
      const child = spawn(...untracked(path.join(projectRoot, 'tools/api-compat.mjs'), [file], env), {
        cwd: projectRoot,
        env,
      })
      let out = ''
      child.stdout.on('data', (d) => (out += d))
      child.stderr.on('data', (d) => (out += d))
      child.on('close', (status) => resolve({ status, out })) // 'close': after stdout and stderr are drained
    }),
  ])
  t.equal(releasedMajor.status, 0, `once released, the new major is the base and passes: ${releasedMajor.out}`)
  t.not(older.status, 0, 'a version below the highest released fails')
  t.match(older.out, 'lower than the released')
  t.not(mainUnreleased.status, 0, 'on main, a version that is not released fails')
  t.match(mainUnreleased.out, 'is not released')
})

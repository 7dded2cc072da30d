// `make api-compat` (tools/api-compat.sh): the contract against the last released one. It must
// pass for the current spec and fail on a real breaking change unless the major version moves.
import t, { type Test } from 'tap'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { parse, stringify } from 'yaml'
import { projectRoot, specPath } from '../../src/paths.js'

const gate = (revision?: string) => spawnSync(path.join(projectRoot, 'tools/api-compat.sh'), revision ? [revision] : [], { encoding: 'utf8', cwd: projectRoot })

function revision(t: Test, change: (spec: any) => void): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'api-compat-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const spec = parse(readFileSync(specPath, 'utf8'))
  change(spec)
  const file = path.join(dir, 'openapi.yaml')
  writeFileSync(file, stringify(spec))
  return file
}

t.test('the current contract passes against the last released one', async (t) => {
  const run = gate()
  t.equal(run.status, 0, run.status === 0 ? 'passes' : run.stdout + run.stderr)
})

t.test('a response property no longer required fails the gate', async (t) => {
  const removeClientUuid = (spec: any) => {
    const user = spec.components.schemas.UserResponse
    user.required = user.required.filter((p: string) => p !== 'client_uuid')
    delete user.properties.client_uuid
  }
  const broken = gate(revision(t, removeClientUuid))
  t.not(broken.status, 0)
  t.match(broken.stdout + broken.stderr, 'require a major bump')

  const released = gate(
    revision(t, (spec) => {
      removeClientUuid(spec)
      spec.info.version = '2.0.0'
    }),
  )
  t.equal(released.status, 0, 'the same change with a new major version passes')
})

t.test('a new required request field fails the gate', async (t) => {
  const run = gate(
    revision(t, (spec) => {
      const body = spec.components.schemas.UserCreateRequest
      body.properties.locale = { type: 'string' }
      body.required.push('locale')
    }),
  )
  t.not(run.status, 0)
  t.match(run.stdout + run.stderr, 'require a major bump')
})

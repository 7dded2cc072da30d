// `make sdk-check`: SDK compatibility. From the SERVED /openapi.json of a running service (real
// PostgreSQL), generate a client with each of openapi-typescript (default flags) + openapi-fetch,
// @hey-api/openapi-ts and orval (`headers: true`); compile each walk with `tsc --strict`; run
// each walk through every operation against the service. Then a Prism mock of the same document
// answers a walk without `sl-violations`. The generators live in tools/sdk (own lock file).
// Also: the blocks of docs/integrators.md run as written in an empty directory outside the clone
// (npm i, pinned) and their client compiles under --strict and answers as the document says; a client generated from spec/released/openapi-1.1.1.yaml passes its
// own walk against this service.
import { execFile, spawn } from 'node:child_process'
import { parse as parseYaml } from 'yaml'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import postgres from 'postgres'
import { buildApp } from '../src/app.js'
import { DEV_API_KEY, loadConfig } from '../src/config.js'
import { createClient } from '../src/db/client.js'
import { migrate } from '../src/db/migrate.js'
import { projectRoot } from '../src/paths.js'
import { listOperations } from '../src/docs/operation-errors.js'
import { ADMIN_URL, databaseUrl } from '../test/helpers/database.js'
import { freePort } from '../test/helpers/server-process.js'
import type { Call } from './sdk/walks/common.js'

const sdkDir = path.join(projectRoot, 'tools/sdk')
const out = path.join(sdkDir, '.out')
const bin = (name: string) => path.join(sdkDir, 'node_modules/.bin', name)
// Asynchronous: the docs/integrators.md commands run meanwhile, and fetch from this very process.
const execFileAsync = promisify(execFile)
const run = async (label: string, cmd: string, args: string[], env: Record<string, string> = {}) => {
  const started = Date.now()
  try {
    await execFileAsync(cmd, args, {
      cwd: sdkDir,
      env: { ...process.env, ...env },
      encoding: 'buffer',
      maxBuffer: 64 << 20,
    })
  } catch (err) {
    const e = err as { stdout?: Buffer; stderr?: Buffer }
    throw new Error(`${label} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`)
  }
  console.log(`ok   ${label} (${((Date.now() - started) / 1000).toFixed(1)} s)`)
}
/** A partner's strict compile of one file: what a TypeScript client project with `strict` sees. */
/** Several files in one run when they are modules of their own: tsc's errors name each file. */
const compileStrict = (label: string, ...files: string[]) =>
  run(`tsc --strict: ${label}`, bin('tsc'), [
    ...['--strict', '--noEmit', '--skipLibCheck', '--target', 'es2022', '--module', 'esnext'],
    ...['--moduleResolution', 'bundler', '--lib', 'es2022,dom', '--types', 'node', ...files],
  ])

let failures = 0
function checkWalk(label: string, calls: Call[], operationIds: string[]) {
  const problems: string[] = []
  for (const id of operationIds) if (!calls.some((c) => c.operationId === id)) problems.push(`${id} not called`)
  for (const c of calls) {
    if (c.status < 200 || c.status > 299) problems.push(`${c.operationId} answered ${c.status}`)
    if (c.violations) problems.push(`${c.operationId}: sl-violations ${c.violations}`)
  }
  if (problems.length) {
    failures++
    console.log(`FAIL ${label}:\n  ${problems.join('\n  ')}`)
  } else {
    console.log(`ok   ${label}: ${calls.length} calls, every operation 2xx`)
  }
}

const name = `sdk_${randomBytes(3).toString('hex')}`
const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
await admin.unsafe(`create database "${name}"`)
const sql = createClient(databaseUrl(name))
// Load shedding off: this process also runs the generators and tsc synchronously, which stalls its
// event loop for seconds; that is this tool's doing, not overload of the service.
const app = await buildApp({
  config: loadConfig({
    // The development key too: docs/integrators.md's client uses it, as against `make run`.
    API_KEYS: `sdk,${DEV_API_KEY}`,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_MAX: '100000',
    LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0',
  }),
  sql,
  logger: false,
})
let prism: ReturnType<typeof spawn> | undefined
let readerCommands: ReturnType<typeof spawn> | undefined
const temporary: string[] = []
try {
  await migrate(sql)
  const base = await app.listen({ port: 0, host: '127.0.0.1' })
  rmSync(out, { recursive: true, force: true })
  mkdirSync(out, { recursive: true })
  const served = await (await fetch(`${base}/openapi.json`)).json()
  const specFile = path.join(out, 'openapi.json')
  writeFileSync(specFile, JSON.stringify(served, null, 2))
  const operationIds = listOperations(served).map((o) => o.operationId)
  // A client generated from 1.1.1 knows only 1.1.1's operations, and must reach each of them.
  const operationIds111 = listOperations(
    parseYaml(readFileSync(path.join(projectRoot, 'spec/released/openapi-1.1.1.yaml'), 'utf8')),
  ).map((o) => o.operationId)

  // docs/integrators.md: its marked shell blocks, in order, as a reader runs them: from an empty
  // directory outside the clone, with no node_modules of this run on the PATH; the service's
  // address is the only change. npm installs from the registry (through the machine's cache).
  const doc = readFileSync(path.join(projectRoot, 'docs/integrators.md'), 'utf8')
  const blocks = [...doc.matchAll(/<!-- sdk-check[^>]*-->\s*```shell\n([\s\S]*?)```/g)].map((m) => m[1]!)
  if (blocks.length === 0) throw new Error('docs/integrators.md has no sdk-check shell block')
  const reader = mkdtempSync(path.join(os.tmpdir(), 'sdk-check-reader-'))
  temporary.push(reader)
  writeFileSync(
    path.join(reader, '.commands.sh'),
    `set -euo pipefail\ncd '${reader}'\n${blocks.join('').replaceAll('http://localhost:3000', base)}`,
  )
  // Installed tools' folders (node_modules/.bin) left out; a Node.js the Makefile put first stays.
  const readerPath = (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter((dir) => !dir.includes(`${path.sep}node_modules${path.sep}.bin`))
    .join(path.delimiter)
  const readerEnv = { ...process.env, PATH: readerPath, NODE_OPTIONS: '' }
  // Started now and awaited below: npm's installs take the longest, and the generators and
  // compilers below run meanwhile (asynchronously: the commands fetch /openapi.json from this
  // very process).
  const started = Date.now()
  const readerDone = new Promise<{ printed: string; ms: number }>((resolve, reject) => {
    const child = spawn('bash', [path.join(reader, '.commands.sh')], {
      cwd: reader,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: readerEnv,
    })
    readerCommands = child
    let stdout = ''
    let log = ''
    child.stdout!.on('data', (d) => {
      stdout += d
      log += d
    })
    child.stderr!.on('data', (d) => (log += d))
    child.on('exit', (code) =>
      code === 0
        ? resolve({ printed: stdout, ms: Date.now() - started })
        : reject(new Error(`docs/integrators.md commands failed:\n${log}`)),
    )
  })
  // Awaited below; a failure meanwhile is not an unhandled rejection.
  readerDone.catch(() => {})
  // The Prism mock starts meanwhile too (its walks are last). Prism does not know the spec's own
  // `iana-time-zone` format (our Ajv enforces it).
  const prismSpec = path.join(out, 'prism-openapi.json')
  writeFileSync(prismSpec, JSON.stringify(served).replaceAll('"format":"iana-time-zone",', ''))
  const prismPort = await freePort()
  prism = spawn(bin('prism'), ['mock', prismSpec, '-p', String(prismPort), '-h', '127.0.0.1'], {
    cwd: sdkDir,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let prismLog = ''
  prism.stdout!.on('data', (d) => (prismLog += d))
  prism.stderr!.on('data', (d) => (prismLog += d))
  await run('openapi-typescript (default flags)', bin('openapi-typescript'), [
    specFile,
    '-o',
    path.join(out, 'openapi-typescript/api.ts'),
  ])
  await run('@hey-api/openapi-ts', bin('openapi-ts'), [
    '-i',
    specFile,
    '-o',
    path.join(out, 'hey-api'),
    '-c',
    '@hey-api/client-fetch',
  ])
  await run('orval (headers: true)', bin('orval'), ['--config', 'orval.config.cjs'], {
    SDK_SPEC: specFile,
    SDK_BASE_URL: base,
  })

  // The 1.1.1 client: types from the released 1.1.1 document, its own walk.
  await run('openapi-typescript from spec/released/openapi-1.1.1.yaml', bin('openapi-typescript'), [
    path.join(projectRoot, 'spec/released/openapi-1.1.1.yaml'),
    '-o',
    path.join(out, 'v1.1.1/api.ts'),
  ])

  const walks = ['openapi-fetch', 'hey-api', 'orval', 'client-1.1.1']
  // One compiler run for the four (each walk and its client are modules: nothing is shared but
  // the standard library, read once instead of four times).
  await compileStrict(
    `each walk and its generated client (${walks.join(', ')})`,
    ...walks.map((walk) => path.join(sdkDir, `walks/${walk}.ts`)),
  )
  for (const walk of walks) {
    const { walk: go } = await import(pathToFileURL(path.join(sdkDir, `walks/${walk}.ts`)).href)
    const expected = walk === 'client-1.1.1' ? operationIds111 : operationIds
    checkWalk(`${walk} walk against the service`, await go(base, 'sdk', `${walk}-${Date.now()}`, true), expected)
  }

  const { printed, ms } = await readerDone
  for (const line of ['live: 200 {"status":"alive","app_env":"dev"}', 'unknown learner: 404 USER_404'])
    if (!printed.includes(`${line}\n`))
      throw new Error(`docs/integrators.md client did not print "${line}":\n${printed}`)
  console.log(
    `ok   docs/integrators.md: ${blocks.length} blocks as written in an empty directory, the client's output as the document says (${(ms / 1000).toFixed(1)} s)`,
  )
  // A request body field the service lets a client leave out is optional in the generated types.
  const project = path.join(reader, 'study-client')
  writeFileSync(
    path.join(project, 'optional-fields.ts'),
    [
      "import type { paths } from './api.ts'",
      "type RollBody = NonNullable<paths['/api/v1/admin/keys/{key_id}/roll']['post']['requestBody']>['content']['application/json']",
      'export const leftOut: RollBody = {}',
      '',
    ].join('\n'),
  )
  try {
    await execFileAsync(
      'npx',
      [
        'tsc',
        ...['--noEmit', '--strict', '--module', 'nodenext', '--allowImportingTsExtensions', '--skipLibCheck'],
        'optional-fields.ts',
      ],
      { cwd: project, env: readerEnv, encoding: 'buffer' },
    )
  } catch (err) {
    const e = err as { stdout?: Buffer; stderr?: Buffer }
    throw new Error(`a roll request without expires_in_seconds does not compile:\n${e.stdout ?? ''}${e.stderr ?? ''}`)
  }
  console.log('ok   openapi-typescript (default flags): a roll request body may leave expires_in_seconds out')
  await compileStrict('hey-api/index.ts from the docs/integrators.md commands', path.join(project, 'hey-api/index.ts'))

  const mock = `http://127.0.0.1:${prismPort}`
  for (let i = 0; ; i++) {
    if ((await fetch(`${mock}/live`).catch(() => undefined))?.ok) break
    if (i > 600 || prism.exitCode !== null) throw new Error(`prism did not start:\n${prismLog}`)
    await sleep(200)
  }
  for (const walk of ['openapi-fetch', 'hey-api']) {
    const { walk: go } = await import(pathToFileURL(path.join(sdkDir, `walks/${walk}.ts`)).href)
    checkWalk(`${walk} walk against a Prism mock`, await go(mock, 'sdk', `${walk}-mock`, false), operationIds)
  }
} catch (err) {
  failures++
  console.log(`FAIL ${(err as Error).message}`)
} finally {
  prism?.kill('SIGTERM')
  // Still running only when something else failed first.
  if (readerCommands?.exitCode === null) readerCommands.kill('SIGTERM')
  for (const dir of temporary) rmSync(dir, { recursive: true, force: true })
  await app.close()
  await sql.end({ timeout: 5 })
  await admin.unsafe(`drop database if exists "${name}" with (force)`)
  await admin.end()
}
if (failures > 0) {
  console.log(`sdk-check: ${failures} failure(s)`)
  process.exit(1)
}
console.log('sdk-check: every generated client compiles under --strict and walks every operation')

// A client generated from the SERVED contract compiles and walks a user and a conspectus
// through the API of a live server with no hand edits.
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { tsImport } from 'tsx/esm/api'
import { writeFileSync } from 'node:fs'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import openapiTS, { astToString } from 'openapi-typescript'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { projectRoot } from '../../src/paths.js'
import { createTestDatabase } from '../helpers/database.js'
import { NO_LOAD_SHEDDING } from '../helpers/app.js'
import { childEnv, untracked } from '../helpers/child-env.js'

t.test('generate from /openapi.json, compile with tsc, run against the server', async (t) => {
  const db = await createTestDatabase(t)
  const app = await buildApp({
    config: loadConfig({ API_KEYS: 'client-key', LOG_LEVEL: 'silent', ...NO_LOAD_SHEDDING }),
    sql: db.sql,
    logger: false,
  })
  t.teardown(() => app.close())
  const base = await app.listen({ port: 0, host: '127.0.0.1' })

  const served = await (await fetch(`${base}/openapi.json`)).json()
  const dir = path.join(projectRoot, 'examples/client')
  // Default flags, as a partner would run it; where docs/integrators.md's commands write it.
  const ast = await openapiTS(served)
  writeFileSync(path.join(dir, 'api.ts'), astToString(ast))

  const env = childEnv()
  execFileSync(
    ...untracked(
      process.execPath,
      [path.join(projectRoot, 'node_modules/typescript/bin/tsc'), '-p', path.join(dir, 'tsconfig.json')],
      env,
    ),
    { stdio: 'pipe', env },
  )
  t.pass('the example compiles against the generated types')

  // Imported by path (the example's types only exist once generated above), through tsx: the
  // example is TypeScript, as a partner would write it.
  const { walk } = await tsImport(pathToFileURL(path.join(dir, 'walk.ts')).href, import.meta.url)
  const result = await walk(base, 'client-key', String(Date.now()))
  t.match(result, {
    user: { username: 'walker', timezone: 'Europe/Berlin' },
    conspectus: { slot: 'B', review_count: 1 },
  })
})

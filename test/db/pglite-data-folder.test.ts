// The embedded database's folder and PGlite's PostgreSQL version: a new folder is made with the
// version the service expects, and a folder of another major version (PGlite 0.5 made PostgreSQL
// 18 folders, which 0.6 cannot open) stops the start with what to do, leaving the folder as it was.
import t, { type Test } from 'tap'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { LOCK_FILE } from '../../src/db/data-dir-lock.js'
import { startEmbeddedDatabase } from '../../src/db/embedded.js'
import { EMBEDDED_POSTGRES_MAJOR } from '../../src/db/embedded-version.js'

// PGlite's first start (initdb) can take minutes on a loaded 2-core machine.
t.setTimeout(600_000)

function tempDir(t: Test) {
  const dir = mkdtempSync(path.join(tmpdir(), 'pglite-folder-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

t.test('a folder of an earlier PostgreSQL major version is refused with what to do, and left as it was', async (t) => {
  const dataDir = tempDir(t)
  // What PGlite 0.5 leaves in its folder's PG_VERSION (checked on a folder it made).
  writeFileSync(path.join(dataDir, 'PG_VERSION'), '18\n')
  await t.rejects(startEmbeddedDatabase(dataDir), {
    name: 'DataDirVersionError',
    message: new RegExp(
      `folder ${dataDir} holds PostgreSQL 18 .* runs PostgreSQL ${EMBEDDED_POSTGRES_MAJOR} and cannot open it: move the folder aside`,
    ),
  })
  t.same(readdirSync(dataDir), ['PG_VERSION'], 'nothing written, the lock released')
  t.notOk(existsSync(path.join(dataDir, LOCK_FILE)))
})

t.test('a new folder is made with the PostgreSQL version the check expects, and opens again', async (t) => {
  const dataDir = tempDir(t)
  const first = await startEmbeddedDatabase(dataDir)
  await first.stop()
  t.equal(readFileSync(path.join(dataDir, 'PG_VERSION'), 'utf8').trim(), EMBEDDED_POSTGRES_MAJOR)
  const again = await startEmbeddedDatabase(dataDir)
  await again.stop()
  t.pass('reopened')
})

// PGlite 0.6 runs PostgreSQL 19; a folder made by PGlite 0.5 holds a PostgreSQL 18 cluster,
// which 0.6 cannot open (a major version's files need a dump and a restore). Checked before
// PGlite opens the folder, so that the start fails with what to do instead of PGlite's
// "failed to initialize properly".
import { readFileSync } from 'node:fs'
import path from 'node:path'

/** The PostgreSQL major version of the folders the installed PGlite makes (test/db/pglite-data-folder.test.ts checks it). */
export const EMBEDDED_POSTGRES_MAJOR = '19'

export class DataDirVersionError extends Error {
  override name = 'DataDirVersionError'
}

/** Throws when `dataDir` holds a database of another PostgreSQL major version; an empty folder passes. */
export function checkDataDirVersion(dataDir: string): void {
  let found: string
  try {
    found = readFileSync(path.join(dataDir, 'PG_VERSION'), 'utf8').trim()
  } catch {
    return
  }
  if (found !== EMBEDDED_POSTGRES_MAJOR)
    throw new DataDirVersionError(
      `the embedded database folder ${dataDir} holds PostgreSQL ${found} (an earlier PGlite); this one runs ` +
        `PostgreSQL ${EMBEDDED_POSTGRES_MAJOR} and cannot open it: move the folder aside to start afresh, or carry ` +
        'its data over as docs/operations.md describes',
    )
}

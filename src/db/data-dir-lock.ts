// One process per PGlite data folder: two PGlite instances on one folder each keep their own
// copy of the database in memory and overwrite each other's files, so acknowledged writes get
// lost. A lock file holding the owner's pid is created atomically (O_EXCL); a lock whose pid is
// no longer alive is stale and taken over.
import { openSync, writeSync, closeSync, readFileSync, unlinkSync } from 'node:fs'
import path from 'node:path'

export const LOCK_FILE = 'study-service.lock'

export class DataDirLockedError extends Error {
  override name = 'DataDirLockedError'
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    // EPERM: the process exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Takes the folder's lock or throws DataDirLockedError naming the holder; returns the release. */
export function lockDataDir(dataDir: string): () => void {
  const file = path.join(dataDir, LOCK_FILE)
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(file, 'wx')
      writeSync(fd, `${process.pid}\n`)
      closeSync(fd)
      return () => {
        try {
          if (readFileSync(file, 'utf8').trim() === String(process.pid)) unlinkSync(file)
        } catch {
          // already gone
        }
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
    let holder = Number.NaN
    try {
      holder = Number.parseInt(readFileSync(file, 'utf8'), 10)
    } catch {
      continue // released meanwhile: try again
    }
    if (Number.isInteger(holder) && holder !== process.pid && isAlive(holder)) {
      throw new DataDirLockedError(
        `the embedded database folder ${dataDir} is in use by process ${holder} (lock ${file}); stop it, or give this process another PGLITE_DATA_DIR or a DATABASE_URL`,
      )
    }
    // Stale (holder dead, unreadable, or our own pid from a previous life): take it over.
    try {
      unlinkSync(file)
    } catch {
      // someone else removed it first
    }
  }
  throw new DataDirLockedError(`could not take the lock ${file} on the embedded database folder ${dataDir}`)
}

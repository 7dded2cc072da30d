// Embedded PostgreSQL (PGlite) for `make run` without DATABASE_URL: persisted in a local folder
// and reached by postgres.js over a loopback socket (one connection only).
import { mkdir } from 'node:fs/promises'
import { PGlite } from '@electric-sql/pglite'
import { PGLiteSocketServer } from '@electric-sql/pglite-socket'
import { lockDataDir } from './data-dir-lock.js'
import { checkDataDirVersion } from './embedded-version.js'

export interface EmbeddedDatabase {
  url: string
  stop(): Promise<void>
}

export async function startEmbeddedDatabase(dataDir: string, port = 0): Promise<EmbeddedDatabase> {
  await mkdir(dataDir, { recursive: true })
  const release = lockDataDir(dataDir)
  // A crash or an exit without stop() still frees the folder for the next start.
  process.once('exit', release)
  try {
    checkDataDirVersion(dataDir)
    const db = await PGlite.create(dataDir)
    const server = new PGLiteSocketServer({
      db,
      host: '127.0.0.1',
      port: port || 15432 + Math.floor(Math.random() * 1000),
    })
    await server.start()
    const conn = server.getServerConn()
    return {
      url: `postgres://postgres@${conn}/postgres`,
      async stop() {
        await server.stop()
        await db.close()
        release()
      },
    }
  } catch (err) {
    release()
    throw err
  }
}

// Process entry point: config, database (PostgreSQL or embedded PGlite), migrations, HTTP
// server, graceful shutdown on SIGTERM/SIGINT.
import { buildApp } from './app.js'
import { ConfigError, loadConfig, startupWarnings, type Config } from './config.js'
import { createClient } from './db/client.js'
import { startEmbeddedDatabase, type EmbeddedDatabase } from './db/embedded.js'
import { migrate } from './db/migrate.js'
import { startTracing } from './tracing/index.js'

const SHUTDOWN_DRAIN_MS = Number(process.env.SHUTDOWN_DRAIN_MS ?? 1000)
const SHUTDOWN_TIMEOUT_MS = 15_000

async function main(config: Config) {
  const tracing = await startTracing()
  let embedded: EmbeddedDatabase | undefined
  if (!config.databaseUrl) embedded = await startEmbeddedDatabase(config.dataDir)
  const sql = createClient(config.databaseUrl ?? embedded!.url, { max: embedded ? 1 : config.databasePoolMax })
  await migrate(sql)

  const app = await buildApp({ config, sql, tracing, listenForKeyChanges: !embedded })
  if (embedded) app.log.info({ dataDir: config.dataDir }, 'no DATABASE_URL: using embedded PostgreSQL (PGlite)')
  for (const warning of startupWarnings(config)) app.log.warn(warning)
  await app.listen({ port: config.port, host: config.host })

  let stopping = false
  const shutdown = async (signal: string) => {
    if (stopping) return
    stopping = true
    app.log.info({ signal }, 'shutting down: draining')
    // /ready answers 503 from now on; the balancer's health check needs the drain period to see
    // it. Meanwhile every answer closes its connection, so no keep-alive connection is left
    // for the balancer to reuse when the server stops accepting.
    app.draining = true
    app.server.prependListener('request', (_req, res) => res.setHeader('connection', 'close'))
    const force = setTimeout(() => process.exit(1), SHUTDOWN_TIMEOUT_MS)
    force.unref()
    await new Promise((r) => setTimeout(r, SHUTDOWN_DRAIN_MS))
    await app.close() // stops accepting, closes idle connections, waits for in-flight requests; closes Redis
    await sql.end({ timeout: 5 })
    await embedded?.stop()
    // Exports the spans still buffered; an unreachable collector does not hold the exit up.
    if (tracing)
      await Promise.race([tracing.shutdown().catch(() => {}), new Promise((r) => setTimeout(r, 2000).unref())])
    app.log.info({ signal }, 'stopped')
    process.exit(0)
  }
  process.on('SIGTERM', () => void shutdown('SIGTERM'))
  process.on('SIGINT', () => void shutdown('SIGINT'))
}

try {
  await main(loadConfig())
} catch (err) {
  const message =
    err instanceof ConfigError ? `configuration error: ${err.message}` : `start failed: ${(err as Error).message}`
  process.stderr.write(`${message}\n`)
  process.exit(1)
}

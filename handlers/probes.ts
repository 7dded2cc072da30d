// getLive and getReady.
import type { HandlerDeps, ServiceHandlers, SuccessBody } from './types.js'

const DB_CHECK_TIMEOUT_MS = 1000
// A flood of probes is not a flood of queries: one database check serves every probe for this long.
const DB_CHECK_CACHE_MS = 1000

interface DatabaseCheck {
  ok: boolean
  latencyMs: number | null
}

async function checkDatabase(deps: HandlerDeps): Promise<DatabaseCheck> {
  const start = performance.now()
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), DB_CHECK_TIMEOUT_MS)))
  try {
    const ok = await Promise.race([deps.db.ping().then(() => true), timeout])
    return { ok, latencyMs: ok ? Math.round((performance.now() - start) * 1000) / 1000 : null }
  } catch {
    return { ok: false, latencyMs: null }
  } finally {
    clearTimeout(timer)
  }
}

/** The latest database check, shared by every probe that arrives within DB_CHECK_CACHE_MS of it. */
function cachedDatabaseCheck(deps: HandlerDeps): () => Promise<DatabaseCheck> {
  let latest: { startedAt: number; check: Promise<DatabaseCheck> } | undefined
  return () => {
    const now = performance.now()
    if (!latest || now - latest.startedAt >= DB_CHECK_CACHE_MS) latest = { startedAt: now, check: checkDatabase(deps) }
    return latest.check
  }
}

export function createProbeHandlers(deps: HandlerDeps): ServiceHandlers<'getLive' | 'getReady'> {
  const databaseCheck = cachedDatabaseCheck(deps)
  return {
    async getLive() {
      return { status: 'alive', app_env: deps.config.appEnv } satisfies SuccessBody<'getLive', 200>
    },

    async getReady(_request, reply) {
      const database = await databaseCheck()
      const checks: Record<string, string> = { database: database.ok ? 'ok' : 'unavailable' }
      const overloaded = deps.isUnderPressure()
      if (overloaded) checks.load = 'overloaded'
      if (deps.isDraining()) checks.shutdown = 'draining'
      const ready = database.ok && !overloaded && !deps.isDraining()
      reply.code(ready ? 200 : 503)
      return { status: ready ? 'ready' : 'not_ready', checks, db_latency_ms: database.latencyMs } satisfies SuccessBody<
        'getReady',
        200
      >
    },
  }
}

// getLive and getReady.
import type { HandlerDeps, ServiceHandlers, SuccessBody } from './types.js'

const DB_CHECK_TIMEOUT_MS = 1000

async function checkDatabase(deps: HandlerDeps): Promise<{ ok: boolean; latencyMs: number | null }> {
  const start = performance.now()
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), DB_CHECK_TIMEOUT_MS)))
  try {
    const ok = await Promise.race([deps.db.sql`select 1`.then(() => true), timeout])
    return { ok, latencyMs: ok ? Math.round((performance.now() - start) * 1000) / 1000 : null }
  } catch {
    return { ok: false, latencyMs: null }
  } finally {
    clearTimeout(timer)
  }
}

export function createProbeHandlers(deps: HandlerDeps): ServiceHandlers<'getLive' | 'getReady'> {
  return {
    async getLive() {
      return { status: 'alive', app_env: deps.config.appEnv } satisfies SuccessBody<'getLive', 200>
    },

    async getReady(_request, reply) {
      const database = await checkDatabase(deps)
      const checks: Record<string, string> = { database: database.ok ? 'ok' : 'unavailable' }
      if (deps.isDraining()) checks.shutdown = 'draining'
      const ready = database.ok && !deps.isDraining()
      reply.code(ready ? 200 : 503)
      return { status: ready ? 'ready' : 'not_ready', checks, db_latency_ms: database.latencyMs } satisfies SuccessBody<'getReady', 200>
    },
  }
}

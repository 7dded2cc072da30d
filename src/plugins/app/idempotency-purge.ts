import fp from 'fastify-plugin'
import { purgeExpired } from '../../idempotency/records.js'

/** Deletes expired idempotency records in small batches, every few minutes, in every replica. */
export default fp<{ intervalMs?: number }>(
  async (fastify, { intervalMs = 5 * 60_000 }) => {
    const purge = async () => {
      try {
        while ((await purgeExpired(fastify.db.sql, 1000)) === 1000);
      } catch (err) {
        fastify.log.warn({ err }, 'idempotency purge failed')
      }
    }
    const timer = setInterval(purge, intervalMs)
    timer.unref()
    fastify.addHook('onClose', async () => clearInterval(timer))
  },
  { name: 'idempotency-purge', dependencies: ['database'] },
)

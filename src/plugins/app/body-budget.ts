import fp from 'fastify-plugin'
import { type BodyBudget, createBodyBudget } from '../../http/body-budget.js'
import { type ClientHoldings, createClientHoldings } from '../../http/client-holdings.js'
import { createUploadRateWatch, type UploadRateWatch } from '../../http/upload-rate.js'

/** Why a request of a client was held back (a label of http_client_refusals_total). */
export type RefusalReason =
  | 'concurrent_requests'
  | 'partner_concurrent_requests'
  | 'body_bytes_in_flight'
  | 'partner_body_bytes_in_flight'
  | 'process_body_bytes_in_flight'
  | 'min_upload_rate'
  | 'load_shed'

declare module 'fastify' {
  interface FastifyInstance {
    /** Request-body bytes in flight across the process (BODY_BYTES_IN_FLIGHT_MAX). */
    bodyBudget: BodyBudget
    /** Requests and body bytes each client holds (CLIENT_MAX_*, a key's own max_*). */
    clientHoldings: ClientHoldings
    /** Uploads slower than REQUEST_BODY_MIN_BYTES_PER_SECOND after REQUEST_BODY_GRACE_MS. */
    uploadRate: UploadRateWatch
    /** Counts a refusal by reason and key id (null: a client without a valid key). */
    countRefusal(reason: RefusalReason, keyId: string | null): void
  }
}

/** The key_id label of a client without a valid key: addresses are not labels (unbounded). */
const NO_KEY = 'none'

/**
 * Exposes what requests hold (`fastify.bodyBudget`, `fastify.clientHoldings`,
 * `fastify.uploadRate`), their gauges and the refusal counter. It refuses nothing itself: the
 * request pipeline counts each request and reserves each body before it is read.
 */
export default fp(
  async (fastify) => {
    const { config } = fastify
    const budget = createBodyBudget(config.bodyBytesInFlightMax)
    const holdings = createClientHoldings()
    const uploadRate = createUploadRateWatch(config.minUploadBytesPerSecond, config.minUploadGraceMs)
    fastify.decorate('bodyBudget', budget)
    fastify.decorate('clientHoldings', holdings)
    fastify.decorate('uploadRate', uploadRate)
    fastify.addHook('onClose', (_instance, done) => {
      uploadRate.close()
      done()
    })
    const client = fastify.metrics.client
    new client.Gauge({
      name: 'http_request_body_bytes_in_flight',
      help: 'Request-body bytes reserved by requests being received or answered (capped by BODY_BYTES_IN_FLIGHT_MAX)',
      collect() {
        this.set(budget.inFlight)
      },
    })
    new client.Gauge({
      name: 'http_clients_holding',
      help: 'Clients (API keys, or addresses without one) with requests in progress',
      collect() {
        this.set(holdings.clients)
      },
    })
    const refusals = new client.Counter({
      name: 'http_client_refusals_total',
      help: 'Requests a client was refused for what it holds or how it sends, and load shed, by reason and API key id ("none" without a valid key)',
      labelNames: ['reason', 'key_id'],
    })
    // Bounded: seven reasons × the configured key ids and "none". Looked up once, then kept.
    const series = new Map<string, ReturnType<typeof refusals.labels>>()
    fastify.decorate('countRefusal', (reason: RefusalReason, keyId: string | null) => {
      const id = keyId ?? NO_KEY
      const name = `${reason} ${id}`
      let counter = series.get(name)
      if (counter === undefined) {
        counter = refusals.labels({ reason, key_id: id })
        series.set(name, counter)
      }
      counter.inc()
    })
  },
  { name: 'body-budget', dependencies: ['config', 'metrics'] },
)

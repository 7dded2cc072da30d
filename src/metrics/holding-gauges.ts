// What requests hold right now (src/http/body-budget.ts, src/http/client-holdings.ts): read at
// scrape time, nothing per request.
import type { BodyBudget } from '../http/body-budget.js'
import type { ClientHoldings } from '../http/client-holdings.js'
import type { MetricsClient } from './client.js'

export function registerHoldingGauges(client: MetricsClient, budget: BodyBudget, holdings: ClientHoldings): void {
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
}

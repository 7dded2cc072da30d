// The database's answer, the pool's size and the process's use of it: read at scrape time,
// nothing per request.
import type { Sql } from '../db/client.js'
import type { Database } from '../db/database.js'
import type { MetricsClient } from './client.js'

const DB_UP_TIMEOUT_MS = 1000

/** One `select 1` per scrape: whether the database answers, whatever the traffic. */
async function databaseAnswers(sql: Sql): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), DB_UP_TIMEOUT_MS)))
  try {
    return await Promise.race([sql`select 1`.then(() => true), timeout])
  } catch {
    return false
  } finally {
    clearTimeout(timer)
  }
}

export function registerPoolGauges(client: MetricsClient, db: Database): void {
  const poolGauge = (name: string, help: string, read: () => number) =>
    new client.Gauge({
      name,
      help,
      collect() {
        this.set(read())
      },
    })
  new client.Gauge({
    name: 'db_up',
    help: '1 when PostgreSQL answered select 1 within 1 s at this scrape, else 0',
    async collect() {
      this.set((await databaseAnswers(db.sql)) ? 1 : 0)
    },
  })
  poolGauge('db_pool_max_connections', 'PostgreSQL connections the pool may open (configured)', () => db.maxConnections)
  poolGauge(
    'db_pool_reserved_connections',
    'Pool connections held for a transaction or a learner export right now',
    () => db.usage.reserved,
  )
  poolGauge(
    'db_pool_export_connections',
    'Pool connections held by learner exports right now (at most EXPORT_MAX_CONNECTIONS)',
    () => db.usage.exports,
  )
  new client.Counter({
    name: 'db_deadline_exceeded_total',
    help: 'Requests answered 503 because their database work passed its deadline, by reason: connection_wait (no connection within DATABASE_CONNECTION_WAIT_MS), deadline (past that plus DATABASE_STATEMENT_TIMEOUT_MS), statement_timeout (cancelled by the server)',
    labelNames: ['reason'],
    collect() {
      this.reset()
      for (const [reason, count] of Object.entries(db.usage.deadlinesExceeded)) this.inc({ reason }, count)
    },
  })
  poolGauge(
    'db_pool_reserve_waiting',
    'Transactions and exports waiting for a free pool connection right now',
    () => db.usage.waiting,
  )
  poolGauge('db_operations_in_flight', 'Statements sent to PostgreSQL and not answered yet', () => db.usage.inFlight)
}

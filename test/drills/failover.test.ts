// Failover drill: the service on a primary with a synchronous standby (both hosts in
// DATABASE_URL, target_session_attrs=primary), eight writers creating users, each retrying
// with the same Idempotency-Key until it gets its 201. The primary's postmaster is killed
// (SIGKILL) and the standby promoted by hand with `pg_ctl promote`, as an operator (or an
// alert-driven script) would: deterministic in CI, and nothing more to install than PostgreSQL
// (pg_auto_failover needs a monitor node and its own timing; Patroni needs a DCS). Asserted:
// no 500 and no hung request meanwhile (503 with Retry-After), the process never exits, it
// serves again within 10 s of the promotion without a restart, every acknowledged write is on
// the new primary, and every key is applied exactly once. `make drill-failover` runs it alone.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { startPrimaryAndStandby } from '../helpers/private-replication.js'
import { freePort, startServer } from '../helpers/server-process.js'

const WRITERS = 8
/** A request with no answer after this long counts as hung. */
const HUNG_MS = 20_000
/** The drill clients retry sooner than Retry-After advises, to measure the gap finely. */
const RETRY_MS = 100

const ports: [number, number] = [await freePort(), await freePort()]
const { primary, standby, promoteStandby } = await startPrimaryAndStandby(t, ports)
const server = await startServer(t, {
  DATABASE_URL: `postgres://postgres@127.0.0.1:${ports[0]},127.0.0.1:${ports[1]}/postgres?target_session_attrs=primary`,
  DATABASE_POOL_MAX: '8',
  RATE_LIMIT_MAX: '10000000',
})
const system = randomUUID()

type Outcome = number | 'hung' | 'network'
const answers: { at: number; ms: number; outcome: Outcome }[] = []
const acknowledged = new Set<string>()
const attempts = new Map<string, number>()
const missingRetryAfter: string[] = []
let stopping = false

async function post(key: string): Promise<Outcome> {
  try {
    const res = await fetch(`${server.base}/api/v1/user`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'k', 'idempotency-key': key },
      body: JSON.stringify({ system_user_id: key, system_uuid: system, full_name: `Writer ${key}` }),
      signal: AbortSignal.timeout(HUNG_MS),
    })
    await res.arrayBuffer()
    if (res.status === 503 && !res.headers.get('retry-after')) missingRetryAfter.push(key)
    return res.status
  } catch (err) {
    return (err as Error).name === 'TimeoutError' ? 'hung' : 'network'
  }
}

async function writer(w: number) {
  for (let n = 0; !stopping; n++) {
    const key = `w${w}-${n}`
    // A key is retried until it is acknowledged, also after the drill stops starting new ones.
    for (;;) {
      attempts.set(key, (attempts.get(key) ?? 0) + 1)
      const sent = performance.now()
      const outcome = await post(key)
      answers.push({ at: performance.now(), ms: performance.now() - sent, outcome })
      if (outcome === 201) {
        acknowledged.add(key)
        break
      }
      if (outcome !== 503 && outcome !== 'network') return // asserted below: only 201 and 503
      await sleep(RETRY_MS)
    }
  }
}

async function until(what: string, condition: () => boolean, limitMs: number) {
  const start = performance.now()
  while (!condition()) {
    if (performance.now() - start > limitMs) throw new Error(`gave up waiting: ${what}`)
    await sleep(20)
  }
}

const count = (from: number, outcome: Outcome) => answers.filter((a) => a.at > from && a.outcome === outcome).length

t.test('the primary is killed under write load and the standby promoted', async (t) => {
  const writers = Array.from({ length: WRITERS }, (_, w) => writer(w))
  await until('writes acknowledged before the kill', () => acknowledged.size >= 100, 30_000)

  const killedAt = performance.now()
  process.kill(primary.postmasterPid(), 'SIGKILL')
  // The operator promotes once the loss shows (writes refused), about a second later.
  await until('writes refused after the kill', () => answers.some((a) => a.at > killedAt && a.outcome !== 201), 15_000)
  await until('a second passed', () => performance.now() - killedAt >= 1000, 5000)
  const promotingAt = performance.now()
  promoteStandby()
  const promotedAt = performance.now()

  await until('a write acknowledged after the promotion', () => count(promotedAt, 201) > 0, 30_000)
  const servedAgain = answers.find((a) => a.at > promotedAt && a.outcome === 201)!.at
  await until('more writes on the new primary', () => count(promotedAt, 201) >= 100, 30_000)
  stopping = true
  await Promise.all(writers)

  const byStatus: Record<string, number> = {}
  for (const a of answers) byStatus[a.outcome] = (byStatus[a.outcome] ?? 0) + 1
  const lastBefore = Math.max(...answers.filter((a) => a.at <= killedAt && a.outcome === 201).map((a) => a.at))
  const slowest = Math.max(...answers.filter((a) => a.at > killedAt && a.at <= servedAgain).map((a) => a.ms))
  t.comment(
    `answers by status: ${JSON.stringify(byStatus)}; slowest answer in the gap ${(slowest / 1000).toFixed(2)} s`,
  )
  t.comment(
    `kill → promote ${((promotingAt - killedAt) / 1000).toFixed(2)} s (pg_ctl promote took ${((promotedAt - promotingAt) / 1000).toFixed(2)} s); ` +
      `promotion → first 201 ${((servedAgain - promotedAt) / 1000).toFixed(2)} s; ` +
      `write gap (last 201 before the kill → first 201 after the promotion) ${((servedAgain - lastBefore) / 1000).toFixed(2)} s`,
  )

  t.equal(byStatus['500'] ?? 0, 0, 'no 500')
  t.equal(byStatus.hung ?? 0, 0, `no request left without an answer for ${HUNG_MS / 1000} s`)
  t.equal(byStatus.network ?? 0, 0, 'no connection dropped by the service')
  t.same(
    Object.keys(byStatus).sort(),
    ['201', '503'].filter((s) => s in byStatus),
    'only 201 and 503',
  )
  t.same(missingRetryAfter, [], 'every 503 carries Retry-After')
  t.equal(server.child.exitCode, null, 'the process never exited')
  t.equal(server.child.signalCode, null)
  t.ok(servedAgain - promotedAt < 10_000, 'serves again within 10 s of the promotion, no restart')

  const newPrimary = postgres(standby.url, { max: 1, onnotice: () => {} })
  t.teardown(() => newPrimary.end({ timeout: 1 }))
  const [state] = await newPrimary<{ in_recovery: boolean }[]>`select pg_is_in_recovery() as in_recovery`
  t.equal(state?.in_recovery, false, 'the standby is the primary now')
  const rows = await newPrimary<{ system_user_id: string; n: number }[]>`
    select system_user_id, count(*)::int as n from users where system_uuid = ${system} group by 1`
  const stored = new Map(rows.map((r) => [r.system_user_id, r.n]))
  const lost = [...acknowledged].filter((key) => !stored.has(key))
  const duplicated = rows.filter((r) => r.n !== 1).map((r) => r.system_user_id)
  const retried = [...attempts].filter(([, n]) => n > 1).map(([key]) => key)
  t.comment(
    `writes acknowledged ${acknowledged.size}, lost ${lost.length}; keys retried ${retried.length}, ` +
      `rows per key ≠ 1: ${duplicated.length}; rows ${rows.length}`,
  )
  t.same(lost, [], 'every acknowledged write is on the new primary')
  t.same(duplicated, [], 'every key applied exactly once, retried or not')
  t.ok(retried.length > 0, 'the drill did retry keys')
  t.equal(rows.length, acknowledged.size, 'nothing stored that was never acknowledged')
})

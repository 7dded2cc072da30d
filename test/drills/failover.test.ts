// Failover drill: the service behind HAProxy on a Patroni cluster (etcd; three nodes: a primary,
// its synchronous standby and a second standby, in synchronous mode strict), run from the files
// in deploy/. Under write load (eight idempotent writers, each retrying its key until it gets its
// 201, plus a new client on a new connection every 100 ms) the primary is lost three ways:
//   crash       its postmaster SIGKILLed;
//   freeze      every process of the node (Patroni and PostgreSQL) SIGSTOPped past the leader
//               TTL, then SIGCONT: the old primary must not acknowledge a write once it resumes;
//   switchover  a planned `patronictl switchover --force`.
// Nothing here promotes anything: Patroni does. Each variant asserts: every acknowledged write is
// on the new primary, every key applied once, only 201 and 503 with Retry-After, no answer slower
// than the service's database deadline plus a second, the process never exits, writes served again within 15 s of the
// fault (for the switchover: at most 5 s between two acknowledged writes). Each prints one line:
//   failover <variant>: promoted by patroni in <s> s; acknowledged <n>, lost <n>; slowest answer <s> s; answers <json>
// and a detail line (which node, when writes came back, whether the old primary rejoined). Then
// each standby is restarted with `patronictl restart`, as a rolling restart does.
// `make drill-failover` runs it alone.
import t, { type Test } from 'tap'
import { randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { request, Agent } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { projectRoot } from '../../src/paths.js'
import { type PatroniNode, startPatroniCluster } from '../helpers/private-patroni.js'
import { startServer } from '../helpers/server-process.js'
import { waitFor, within } from '../helpers/wait.js'

/**
 * The drill's leader-key timing: a leader that stops renewing loses its key after 6 s; Patroni
 * wakes every second; a DCS or PostgreSQL call is retried for 2 s (1 + 2 * 2 <= 6). Production
 * keeps Patroni's defaults (deploy/patroni/: 30, 10, 10).
 */
const TIMING = { ttl: 6, loop_wait: 1, retry_timeout: 2 }
/** HAProxy checks each node's /primary this often; two failures take a node out. */
const CHECK_INTER_MS = 250
const WRITERS = 8
const NEW_CLIENT_EVERY_MS = 100
const RETRY_MS = 100
/**
 * The service's bounds on a request's database work (README: DATABASE_CONNECTION_WAIT_MS and
 * DATABASE_STATEMENT_TIMEOUT_MS, here their defaults): a request's database work ends within
 * their sum. An answer later than that plus a second counts as past the deadline (and is aborted).
 */
const DATABASE_WAITS = { DATABASE_CONNECTION_WAIT_MS: 2_000, DATABASE_STATEMENT_TIMEOUT_MS: 5_000 }
const CLIENT_DEADLINE_MS =
  DATABASE_WAITS.DATABASE_CONNECTION_WAIT_MS + DATABASE_WAITS.DATABASE_STATEMENT_TIMEOUT_MS + 1_000
/**
 * Writes served again within this long. A crash or a freeze stops writes at once, so it is
 * counted from the fault; a switchover stops them only once Patroni demotes the primary (after
 * patronictl has started and asked it), so it is counted as the write gap: the longest time
 * between two acknowledged writes.
 */
/** How long after the writers stop the drill waits for the old primary to replicate again. */
const REJOIN_WAIT_MS = 10_000
const SERVED_AGAIN_WITHIN_MS = { crash: 15_000, freeze: 15_000, switchover: 5_000 }

/** The command block of docs/operations.md marked `<!-- failover-drill: NAME -->`, as written. */
function runbookBlock(name: string): string {
  const runbook = readFileSync(path.join(projectRoot, 'docs/operations.md'), 'utf8')
  const block = new RegExp(`<!-- failover-drill: ${name} -->\\s*\`\`\`sh\\n([\\s\\S]*?)\`\`\``).exec(runbook)?.[1]
  if (block === undefined) throw new Error(`docs/operations.md has no block marked failover-drill: ${name}`)
  return block
}

const setUpAt = performance.now()
const cluster = await startPatroniCluster(t, { timing: TIMING, checkInterMs: CHECK_INTER_MS })
// A start that fails ends the file before any teardown: stop the cluster first.
const server = await startServer(t, {
  // The balancer alone: it forwards to whichever node Patroni's /primary names.
  DATABASE_URL: cluster.balancerUrl,
  // The default pool (DATABASE_POOL_MAX 10).
  DATABASE_CONNECTION_WAIT_MS: String(DATABASE_WAITS.DATABASE_CONNECTION_WAIT_MS),
  DATABASE_STATEMENT_TIMEOUT_MS: String(DATABASE_WAITS.DATABASE_STATEMENT_TIMEOUT_MS),
  RATE_LIMIT_MAX: '10000000',
  CLIENT_MAX_CONCURRENT_REQUESTS: '10000',
}).catch(async (err) => {
  await cluster.stop()
  throw err
})
t.comment(
  `set-up (etcd, three Patroni nodes, HAProxy, the service) ${((performance.now() - setUpAt) / 1000).toFixed(1)} s`,
)
const [host, port] = [new URL(server.base).hostname, Number(new URL(server.base).port)]
const keepAlive = new Agent({ keepAlive: true, maxSockets: WRITERS })

type Outcome = number | 'deadline' | 'network'
interface Answer {
  sent: number
  at: number
  outcome: Outcome
}

/** One POST /api/v1/user; `fresh`: on a connection of its own, as a new client would. */
function post(system: string, key: string, fresh: boolean): Promise<{ outcome: Outcome; retryAfter: boolean }> {
  const body = JSON.stringify({ system_user_id: key, system_uuid: system, full_name: `Writer ${key}` })
  return new Promise((resolve) => {
    const req = request(
      {
        host,
        port,
        method: 'POST',
        path: '/api/v1/user',
        agent: fresh ? false : keepAlive,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'x-api-key': 'k',
          'idempotency-key': `${system}-${key}`,
        },
        timeout: CLIENT_DEADLINE_MS,
      },
      (res) => {
        res.resume()
        res.on('end', () => resolve({ outcome: res.statusCode!, retryAfter: Boolean(res.headers['retry-after']) }))
        res.on('error', () => resolve({ outcome: 'network', retryAfter: false }))
      },
    )
    req.on('timeout', () => {
      req.destroy()
      resolve({ outcome: 'deadline', retryAfter: false })
    })
    req.on('error', () => resolve({ outcome: 'network', retryAfter: false }))
    req.end(body)
  })
}

/** Writers and new clients creating users under one system, until stop(). */
function load(system: string) {
  const answers: Answer[] = []
  const acknowledged = new Set<string>()
  const attempts = new Map<string, number>()
  const missingRetryAfter: string[] = []
  let stopping = false
  let unexpected = false

  /** Sends `key` until it is acknowledged (also after stop()); false on an answer the drill does not expect. */
  async function until201(key: string, fresh: boolean): Promise<boolean> {
    for (;;) {
      attempts.set(key, (attempts.get(key) ?? 0) + 1)
      const sent = performance.now()
      const { outcome, retryAfter } = await post(system, key, fresh)
      answers.push({ sent, at: performance.now(), outcome })
      if (outcome === 201) {
        acknowledged.add(key)
        return true
      }
      if (outcome === 503 && !retryAfter) missingRetryAfter.push(key)
      if (outcome !== 503 && outcome !== 'network' && outcome !== 'deadline') {
        unexpected = true // asserted below: only 201 and 503
        return false
      }
      if (unexpected) return false
      await sleep(RETRY_MS)
    }
  }
  const writers = Array.from({ length: WRITERS }, async (_, w) => {
    for (let n = 0; !stopping; n++) if (!(await until201(`w${w}-${n}`, false))) return
  })
  const clients: Promise<boolean>[] = []
  const spawner = (async () => {
    for (let n = 0; !stopping && !unexpected; n++) {
      clients.push(until201(`c${n}`, true))
      await sleep(NEW_CLIENT_EVERY_MS)
    }
  })()
  return {
    answers,
    acknowledged,
    attempts,
    missingRetryAfter,
    async stop() {
      stopping = true
      await within('the writers and clients to finish', Promise.all([...writers, spawner]), 60_000)
      await within('every client acknowledged', Promise.all(clients), 60_000)
    },
  }
}

const seconds = (ms: number) => (ms / 1000).toFixed(2)
const acknowledgedAfter = (answers: Answer[], from: number) => answers.filter((a) => a.at > from && a.outcome === 201)

/** Rows of `system` on `node`, read directly (not through the balancer). */
async function storedOn(node: PatroniNode, system: string) {
  const sql = postgres(node.url, { max: 1, onnotice: () => {}, connect_timeout: 5 })
  try {
    const [state] = await sql<{ in_recovery: boolean }[]>`select pg_is_in_recovery() as in_recovery`
    const rows = await sql<{ system_user_id: string; n: number }[]>`
      select system_user_id, count(*)::int as n from users where system_uuid = ${system} group by 1`
    return { inRecovery: state!.in_recovery, rows }
  } finally {
    await sql.end({ timeout: 1 })
  }
}

/** Whether `node`'s PostgreSQL answers as a primary (out of recovery), asked directly. */
async function isPrimary(node: PatroniNode): Promise<boolean> {
  const sql = postgres(node.url, { max: 1, onnotice: () => {}, connect_timeout: 1 })
  try {
    const [state] = await within('pg_is_in_recovery()', sql<{ r: boolean }[]>`select pg_is_in_recovery() as r`, 2000)
    return state?.r === false
  } catch {
    return false
  } finally {
    await sql.end({ timeout: 0 })
  }
}

/**
 * Waits for the node Patroni promotes: another than `old` that holds the leader key (its
 * /primary answers 200) and whose PostgreSQL is out of recovery.
 */
async function promotedOtherThan(old: PatroniNode, limitMs: number): Promise<PatroniNode> {
  return waitFor(
    `a node other than ${old.name} promoted`,
    async () => {
      for (const node of cluster.nodes) {
        if (node !== old && (await node.api('/primary', 500)).status === 200 && (await isPrimary(node))) return node
      }
      return false
    },
    { timeoutMs: limitMs, everyMs: 50 },
  )
}

interface Fault {
  /** Causes the fault; resolves once it is done (a freeze: once the node resumed). */
  cause(old: PatroniNode, faultAt: number): Promise<PatroniNode>
}

async function drill(t: Test, variant: keyof typeof SERVED_AGAIN_WITHIN_MS, fault: Fault) {
  await cluster.complete()
  const { leader: old } = await cluster.healthy()
  const system = randomUUID()
  const writes = load(system)
  await waitFor('writes acknowledged before the fault', () => writes.acknowledged.size >= 100, { timeoutMs: 60_000 })

  const faultAt = performance.now()
  const promoted = await fault.cause(old, faultAt)
  const promotedAt = performance.now()
  const servedAgain = await waitFor(
    'a write acknowledged by the new primary',
    () => acknowledgedAfter(writes.answers, promotedAt)[0],
    { timeoutMs: 60_000 },
  )
  await waitFor('more writes on the new primary', () => acknowledgedAfter(writes.answers, promotedAt).length >= 100, {
    timeoutMs: 60_000,
  })
  await writes.stop()

  const byStatus: Record<string, number> = {}
  for (const a of writes.answers) byStatus[a.outcome] = (byStatus[a.outcome] ?? 0) + 1
  const slowest = Math.max(...writes.answers.map((a) => a.at - a.sent))
  const acknowledgedAt = writes.answers.filter((a) => a.outcome === 201).map((a) => a.at)
  acknowledgedAt.sort((a, b) => a - b)
  const writeGap = Math.max(...acknowledgedAt.slice(1).map((at, i) => at - acknowledgedAt[i]!))
  const servedAgainMs = variant === 'switchover' ? writeGap : servedAgain.at - faultAt
  // The old primary rejoining as a standby is Patroni's work too; reported, not asserted: writes
  // never wait for it while a third node can be the synchronous standby.
  const rejoined = await waitFor(`${old.name} replicating from ${promoted.name}`, () => cluster.replicating(old), {
    timeoutMs: REJOIN_WAIT_MS,
    everyMs: 200,
  }).then(
    () => `had rejoined as a standby by ${seconds(performance.now() - faultAt)} s after the fault`,
    async () => `had not rejoined ${REJOIN_WAIT_MS / 1000} s later (${JSON.stringify(await cluster.memberState(old))})`,
  )
  const stored = await storedOn(promoted, system)
  const rows = new Map(stored.rows.map((r) => [r.system_user_id, r.n]))
  const lost = [...writes.acknowledged].filter((key) => !rows.has(key))
  const duplicated = stored.rows.filter((r) => r.n !== 1).map((r) => r.system_user_id)
  const retried = [...writes.attempts].filter(([, n]) => n > 1).map(([key]) => key)

  t.comment(
    `failover ${variant}: promoted by patroni in ${seconds(promotedAt - faultAt)} s; ` +
      `acknowledged ${writes.acknowledged.size}, lost ${lost.length}; slowest answer ${seconds(slowest)} s; ` +
      `answers ${JSON.stringify(byStatus)}`,
  )
  t.comment(
    `failover ${variant} detail: ${old.name} → ${promoted.name}; first write acknowledged by the new primary ${seconds(servedAgain.at - faultAt)} s after the fault; ` +
      `write gap (longest time between two acknowledged writes) ${seconds(writeGap)} s; keys retried ${retried.length}; ${old.name} ${rejoined}`,
  )

  t.not(promoted, old, 'another node leads')
  t.equal(stored.inRecovery, false, `${promoted.name} is a primary`)
  t.equal(byStatus['500'] ?? 0, 0, 'no 500')
  t.equal(byStatus.deadline ?? 0, 0, `no request without an answer within ${CLIENT_DEADLINE_MS / 1000} s`)
  t.equal(byStatus.network ?? 0, 0, 'no connection dropped by the service')
  t.same(
    Object.keys(byStatus).sort(),
    ['201', '503'].filter((s) => s in byStatus),
    'only 201 and 503',
  )
  t.same(writes.missingRetryAfter, [], 'every 503 carries Retry-After')
  t.equal(server.child.exitCode, null, 'the process never exited')
  t.equal(server.child.signalCode, null)
  t.ok(
    servedAgainMs <= SERVED_AGAIN_WITHIN_MS[variant],
    `writes served again within ${SERVED_AGAIN_WITHIN_MS[variant] / 1000} s (${variant === 'switchover' ? 'write gap' : 'of the fault'})`,
  )
  t.same(lost, [], 'every acknowledged write is on the new primary')
  t.same(duplicated, [], 'every key applied exactly once, retried or not')
  t.equal(stored.rows.length, writes.acknowledged.size, 'nothing stored that was never acknowledged')
  if (!rejoined.startsWith('had rejoined')) {
    // A former primary Patroni could not rewind: an operator's answer, so the next variant
    // starts whole (and the output says it happened).
    t.comment(`failover ${variant}: ${old.name} cloned again with patronictl reinit`)
    await cluster.reinit(old)
    await cluster.complete()
  }
  return { old, promoted }
}

t.test('the alert rules of the database tier name metrics Patroni serves', async (t) => {
  const rules = readFileSync(path.join(projectRoot, 'deploy/prometheus/alerts.yml'), 'utf8')
  const named = new Set(rules.match(/\bpatroni_[a-z_]+/g))
  t.ok(named.size >= 5, `${named.size} Patroni metrics named`)
  for (const node of cluster.nodes) {
    const { status, body } = await node.api('/metrics')
    t.equal(status, 200)
    const served = new Set(String(body).match(/^patroni_[a-z_]+/gm))
    for (const name of named) t.ok(served.has(name), `${node.name} serves ${name}`)
  }
})

t.test('crash: the primary’s postmaster is killed', (t) =>
  drill(t, 'crash', {
    async cause(old) {
      process.kill(old.postmasterPid(), 'SIGKILL')
      return promotedOtherThan(old, 30_000)
    },
  }),
)

t.test('freeze: every process of the primary stopped past the leader TTL, then resumed', async (t) => {
  // A client of the primary's own, connected before the freeze: once the node resumes, it tries
  // a write on the old primary directly (no balancer in between).
  const probeTable = `fence_${randomUUID().replaceAll('-', '')}`
  let probe: { outcome: string; ms: number } | undefined
  await drill(t, 'freeze', {
    async cause(old, faultAt) {
      const direct = postgres(old.url, { max: 1, onnotice: () => {}, connect_timeout: 5 })
      t.teardown(() => direct.end({ timeout: 0 }))
      await direct.unsafe(`create table ${probeTable} (at timestamptz not null)`)
      const processes = old.processes()
      // The postmaster first, so it forks no new backend, then its children, then Patroni.
      for (const pid of processes) process.kill(pid, 'SIGSTOP')
      const promoted = await promotedOtherThan(old, 30_000)
      await waitFor('the leader TTL passed', () => performance.now() - faultAt > TIMING.ttl * 1000 + 1000, {
        timeoutMs: 30_000,
        everyMs: 50,
      })
      for (const pid of processes) process.kill(pid, 'SIGCONT')
      const resumedAt = performance.now()
      try {
        await within(
          'the write on the resumed old primary',
          direct.unsafe(`insert into ${probeTable} values (now())`),
          30_000,
        )
        probe = { outcome: 'acknowledged', ms: performance.now() - resumedAt }
      } catch (err) {
        const e = err as { code?: string; message: string }
        const outcome = e.message.startsWith('gave up waiting') ? 'had no answer' : `failed (${e.code}: ${e.message})`
        probe = { outcome, ms: performance.now() - resumedAt }
      }
      return promoted
    },
  })
  t.comment(
    `failover freeze, the old primary resumed: its write ${probe!.outcome} after ${(probe!.ms / 1000).toFixed(2)} s`,
  )
  t.not(probe!.outcome, 'acknowledged', 'the old primary acknowledged no write after it resumed')
  const { leader } = await cluster.healthy()
  const sql = postgres(leader.url, { max: 1, onnotice: () => {} })
  t.teardown(() => sql.end({ timeout: 1 }))
  const [row] = await sql.unsafe<{ n: number }[]>(`select count(*)::int as n from ${probeTable}`)
  t.equal(row?.n, 0, 'the write the old primary took is nowhere in the cluster')
})

t.test('switchover: a planned change of leader under load', (t) =>
  drill(t, 'switchover', {
    async cause(old) {
      // The runbook's switchover, as written.
      const switched = cluster.run(runbookBlock('switchover'))
      const promoted = await promotedOtherThan(old, 30_000)
      t.match(await switched, /Successfully switched over/, 'patronictl switched over')
      return promoted
    },
  }),
)

t.test(
  'rolling restart: Patroni restarts each standby’s PostgreSQL, the cluster keeps its synchronous standby',
  async (t) => {
    const { leader } = await cluster.healthy()
    for (const node of cluster.nodes.filter((n) => n !== leader)) {
      const before = node.postmasterPid()
      // The runbook's restart of one member, as written.
      t.match(
        await cluster.run(runbookBlock('restart'), { MEMBER: node.name }),
        /Success: restart on member/,
        `patronictl restarted ${node.name}`,
      )
      await cluster.healthy()
      t.not(node.postmasterPid(), before, `${node.name} runs a new postmaster`)
    }
    const after = await cluster.healthy()
    t.equal(after.leader, leader, 'the primary stayed the primary')
  },
)

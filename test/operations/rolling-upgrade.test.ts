// A rolling upgrade from the previous release (releases.json) to this tree under steady load:
// two replicas of the previous release, built from its commit, serve a fresh database behind a
// private HAProxy (deploy/haproxy.cfg, checking /ready); a replica of this version starts and
// migrates while they serve; then each old replica is stopped (SIGTERM) once a new one is in
// rotation, and a new one takes its place. Nothing may fail at the balancer, every acknowledged
// write must be stored, and a write answered by the old version must be replayed by the new one.
import t from 'tap'
import { randomUUID } from 'node:crypto'
import { readdirSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { createTestDatabase } from '../helpers/database.js'
import { buildRelease, releases } from '../helpers/release-build.js'
import { freePort, startServer, type ServerBuild, type ServerProcess } from '../helpers/server-process.js'
import { startPrivateHaproxy } from '../helpers/private-haproxy.js'
import { migrationsDir } from '../../src/paths.js'

// The first build of the previous release (production dependencies, tsc) takes a minute on a
// loaded machine; later runs reuse it.
t.setTimeout(600_000)

const API_KEY = 'upgrade-key'
const CHECK_INTER_MS = 200

type Phase = 'old' | 'mixed' | 'new'
interface Write {
  phase: Phase
  key: string
  body: string
  status: number
  answer: string
}

t.test(
  'rolling upgrade from the previous release under load: no error, nothing lost, old answers replayed',
  async (t) => {
    const previous = releases().at(-1)!
    const started = Date.now()
    const oldDir = buildRelease(previous.commit, (line) => t.comment(`build ${previous.version}: ${line}`))
    t.comment(
      `previous release ${previous.version} (${previous.commit.slice(0, 7)}) ready in ${Math.round((Date.now() - started) / 1000)} s`,
    )
    const oldBuild: ServerBuild = { cwd: oldDir, args: ['dist/src/server.js'] }

    const db = await createTestDatabase(t, { migrated: false })
    const ports = await Promise.all([freePort(), freePort(), freePort()])
    const env = (port: number) => ({
      PORT: String(port),
      DATABASE_URL: db.url,
      API_KEYS: API_KEY,
      RATE_LIMIT_MAX: '1000000',
      SHUTDOWN_DRAIN_MS: String(CHECK_INTER_MS * 6),
      LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0',
    })
    // Every replica started, for its error lines when the balancer saw a 5xx.
    const replicas: [string, ServerProcess][] = []
    const named = async (name: string, replica: Promise<ServerProcess>) => {
      replicas.push([name, await replica])
      return replicas.at(-1)![1]
    }
    // The previous release creates the schema (the first one migrates, the second finds it done).
    const oldA = await named('replica 1 (previous release)', startServer(t, env(ports[0]!), oldBuild))
    const oldB = await named('replica 2 (previous release)', startServer(t, env(ports[1]!), oldBuild))
    const haproxy = await startPrivateHaproxy(
      t,
      ports.map((p) => `127.0.0.1:${p}`),
      CHECK_INTER_MS,
    )

    const writes: Write[] = []
    const failures: string[] = []
    const readStatuses = new Map<number, number>()
    let phase: Phase = 'old'
    let running = true
    let sent = 0

    const writer = async (w: number) => {
      while (running) {
        const key = `upgrade-${w}-${sent++}-${randomUUID().slice(0, 8)}`
        const body = JSON.stringify({
          system_user_id: key.slice(0, 36),
          system_uuid: randomUUID(),
          full_name: `Upgrade ${w}`,
        })
        const at = phase
        try {
          const res = await fetch(`${haproxy.base}/api/v1/user`, {
            method: 'POST',
            headers: { 'x-api-key': API_KEY, 'content-type': 'application/json', 'idempotency-key': key },
            body,
          })
          const answer = await res.text()
          if (res.status >= 500) failures.push(`POST ${key}: ${res.status} ${answer.slice(0, 120)}`)
          writes.push({ phase: at, key, body, status: res.status, answer })
        } catch (err) {
          failures.push(`POST ${key}: ${(err as Error).message} ${String((err as { cause?: unknown }).cause ?? '')}`)
        }
        await sleep(30)
      }
    }
    const reader = async () => {
      while (running) {
        const done = writes.filter((w) => w.status === 201)
        const pick = done[Math.floor(Math.random() * done.length)]
        if (pick) {
          const { system_uuid, system_user_id } = JSON.parse(pick.body)
          try {
            const res = await fetch(
              `${haproxy.base}/api/v1/user/${system_uuid}/${encodeURIComponent(system_user_id)}`,
              { headers: { 'x-api-key': API_KEY } },
            )
            readStatuses.set(res.status, (readStatuses.get(res.status) ?? 0) + 1)
            const text = await res.text()
            if (res.status >= 500) failures.push(`GET: ${res.status} ${text.slice(0, 120)}`)
          } catch (err) {
            failures.push(`GET: ${(err as Error).message} ${String((err as { cause?: unknown }).cause ?? '')}`)
          }
        }
        await sleep(20)
      }
    }
    const load = [writer(0), writer(1), writer(2), reader()]

    /** In rotation: ready, then HAProxy's two good checks. */
    const inRotation = async (replica: ServerProcess) => {
      for (let k = 0; k < 200 && (await fetch(`${replica.base}/ready`)).status !== 200; k++) await sleep(100)
      await sleep(CHECK_INTER_MS * 3)
    }
    const replaceWithNew = async (old: ServerProcess, port: number, name: string) => {
      old.child.kill('SIGTERM')
      t.equal(await old.exited, 0, `${name} (previous release) drained and exited 0`)
      const fresh = await named(`${name} (this version)`, startServer(t, env(port)))
      await inRotation(fresh)
      return fresh
    }

    // Steady load first: at least 10 writes answered by the previous release (a busy machine
    // takes longer; the condition, not a time, ends the wait).
    const answered = (p: Phase) => writes.filter((w) => w.phase === p && w.status === 201).length
    for (let k = 0; k < 600 && answered('old') < 10; k++) await sleep(50)
    t.ok(
      writes.some((w) => w.status === 201),
      'the previous release answers writes',
    )

    // This version's first replica migrates while the previous release serves.
    phase = 'mixed'
    const newC = await named('replica 3 (this version)', startServer(t, env(ports[2]!)))
    await inRotation(newC)
    const migrated = await db.sql<{ name: string }[]>`select name from schema_migrations order by name`
    t.same(
      migrated.map((r) => r.name),
      readdirSync(migrationsDir)
        .filter((f) => f.endsWith('.sql'))
        .sort(),
      'this version’s migrations are applied',
    )

    await replaceWithNew(oldA, ports[0]!, 'replica 1')
    oldB.child.kill('SIGTERM')
    t.equal(await oldB.exited, 0, 'replica 2 (previous release) drained and exited 0')
    phase = 'new'
    for (let k = 0; k < 600 && answered('new') < 10; k++) await sleep(50)
    running = false
    await Promise.all(load)

    const statuses = new Map<number, number>()
    for (const w of writes) statuses.set(w.status, (statuses.get(w.status) ?? 0) + 1)
    if (failures.length > 0)
      for (const [name, replica] of replicas)
        for (const line of replica.output().split('\n'))
          if (/"level":(50|60)/.test(line)) t.comment(`${name}: ${line.slice(0, 600)}`)
    t.same(failures, [], 'no 5xx and no connection error at the balancer')
    t.same([...statuses.keys()], [201], `every write succeeded: ${JSON.stringify([...statuses])}`)
    t.same([...readStatuses.keys()], [200], `every read found its user: ${JSON.stringify([...readStatuses])}`)
    const byPhase = (p: Phase) => writes.filter((w) => w.phase === p).length
    t.ok(
      byPhase('old') >= 10 && byPhase('mixed') >= 10,
      `steady load: ${byPhase('old')} writes before the upgrade, ${byPhase('mixed')} during, ${byPhase('new')} after`,
    )

    const keys = writes.map((w) => JSON.parse(w.body).system_user_id as string)
    const stored = await db.sql<
      { system_user_id: string }[]
    >`select system_user_id from users where system_user_id = any(${keys})`
    t.equal(stored.length, writes.length, 'every acknowledged write is in the database')

    // Only this version serves now: every write answered by the previous release (and during the
    // upgrade) is replayed, same status and body, marked as a replay.
    const wrong: string[] = []
    for (const w of writes.filter((w) => w.phase !== 'new')) {
      const res = await fetch(`${haproxy.base}/api/v1/user`, {
        method: 'POST',
        headers: { 'x-api-key': API_KEY, 'content-type': 'application/json', 'idempotency-key': w.key },
        body: w.body,
      })
      const answer = await res.text()
      if (res.status !== w.status || answer !== w.answer || res.headers.get('idempotent-replayed') !== 'true') {
        wrong.push(
          `${w.phase} ${w.key}: ${res.status} replayed=${res.headers.get('idempotent-replayed')} ${answer.slice(0, 80)} (was ${w.status} ${w.answer.slice(0, 80)})`,
        )
      }
    }
    t.same(
      wrong,
      [],
      `${writes.filter((w) => w.phase !== 'new').length} writes of the previous release and the upgrade replayed by this version`,
    )
    t.comment(`upgrade test took ${Math.round((Date.now() - started) / 1000)} s`)
  },
)

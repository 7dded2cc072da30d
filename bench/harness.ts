// Shared by the benchmarks: a fresh database with the bench data set, and servers started as
// child processes pinned to one core (the load generator runs on another).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { createServer as createHttpServer } from 'node:http'
import { randomBytes } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import { migrate } from '../src/db/migrate.js'
import { projectRoot } from '../src/paths.js'
import { legacyKeyId } from '../src/auth/api-keys.js'
import { ADMIN_URL, databaseUrl } from '../test/helpers/database.js'

export const API_KEY = 'bench-key'
/** The learner of the due-list case: 60 due notes, so that a page of 50 is full. */
export const DUE_LIST_LEARNER = 'b-0'
export const SERVER_CPU = process.env.BENCH_SERVER_CPU ?? '0'
/** The other core: the load generator's (the Makefile pins the driver there). */
export const LOAD_CPU = SERVER_CPU === '0' ? '1' : '0'

/**
 * Where PostgreSQL runs, the two set-ups of `make bench`: "node-bound" puts it on the load
 * generator's core so the server has its core alone (production: the database is elsewhere and
 * a replica's own CPU per request decides how many replicas are needed); "shared" puts it on the
 * servers' core.
 */
export type Setup = 'node-bound' | 'shared'
export const SETUP_CPU: Record<Setup, string> = { 'node-bound': LOAD_CPU, shared: SERVER_CPU }

/** The Node.js binary the servers run on (BENCH_NODE, e.g. the Docker image's Node 24; default this one). */
const SERVER_NODE = process.env.BENCH_NODE ?? process.execPath

/** Servers started by startServer, stopped by stopServers (or on an interrupt). */
const children: ChildProcess[] = []

/** µs of CPU per clock tick (/proc counts 100 ticks a second on Linux). */
export const US_PER_TICK = 10_000

/** utime + stime from a /proc stat file, in clock ticks (100 per second on Linux). */
function statTicks(file: string): number {
  const fields = readFileSync(file, 'utf8').split(') ')[1]!.split(' ')
  return Number(fields[11]) + Number(fields[12])
}

/** utime + stime of a process (all its threads), in clock ticks. */
export const cpuTicks = (pid: number): number => statTicks(`/proc/${pid}/stat`)

/** The same, summed over every PostgreSQL process of the machine (backends and workers). */
export function postgresCpuTicks(): number {
  let sum = 0
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8') === 'postgres\n') sum += cpuTicks(Number(entry))
    } catch {} // a process that has just exited
  }
  return sum
}

/** Busy and total clock ticks of one core so far (/proc/stat; idle and iowait are not busy). */
export function coreTicks(core: string): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`cpu${core} `))!
  const ticks = line.trim().split(/\s+/).slice(1).map(Number)
  const total = ticks.reduce((a, b) => a + b, 0)
  return { busy: total - ticks[3]! - ticks[4]!, total }
}

/** How busy a core was between two coreTicks readings (0..1). */
export const busyShare = (before: ReturnType<typeof coreTicks>, after: ReturnType<typeof coreTicks>) =>
  (after.busy - before.busy) / Math.max(after.total - before.total, 1)

export const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0)
/** A number from BENCH_<name>, or the fallback. */
export const setting = (name: string, fallback: number) => Number(process.env[`BENCH_${name}`] ?? fallback)

/** `runs` pairs of a run of `a` and one of `b`, the order alternating (a, b; b, a; ...). */
export async function alternate<T>(runs: number, a: () => Promise<T>, b: () => Promise<T>) {
  const pairs: { a: T; b: T }[] = []
  for (let run = 0; run < runs; run++) {
    const first = await (run % 2 === 0 ? a : b)()
    pairs.push(run % 2 === 0 ? { a: first, b: await b() } : { a: await a(), b: first })
  }
  return pairs
}

/** The middle value (the upper one of an even count). */
export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

export interface BenchDatabase {
  url: string
  /** A plain client: seeding a million rows outlasts the service's statement_timeout. */
  sql: postgres.Sql
  /** VACUUM ANALYZE and CHECKPOINT, so that the next case pays for none of the previous one's writes. */
  settle(): Promise<void>
  /** Whether PostgreSQL could be pinned at all (it must be local and ours to pin). */
  postgresPinned: boolean
  /** Moves PostgreSQL (postmaster and every backend, existing and future) to the set-up's core. */
  setup(setup: Setup): void
  /** A copy of this database, files copied (no other session may be open on this one meanwhile). */
  copy(): Promise<{ url: string; sql: postgres.Sql; drop(): Promise<void> }>
  drop(): Promise<void>
}

/**
 * A new database, migrated, seeded with 10k users and 100k conspectuses (10 each, all due; the
 * due-list learner has 50 more; every other learner also has one FSRS note, a few reviews in), and
 * 10k stored partner keys (each replica holds them in memory). The paired bench settles the
 * database between its cases (`settle`) rather than leave it to autovacuum.
 */
export async function createBenchDatabase(prefix: string): Promise<BenchDatabase> {
  const name = `${prefix}_${randomBytes(3).toString('hex')}`
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
  await admin.unsafe(`create database "${name}"`)
  const url = databaseUrl(name)
  const sql = postgres(url, { max: 4, onnotice: () => {} })
  const pin = await pinPostgres(sql)
  // A parallel worker on the one core PostgreSQL has would only contend with its leader.
  await admin.unsafe(`alter database "${name}" set max_parallel_workers_per_gather = ${pin.pinned ? 0 : 1}`)
  await migrate(sql as never)
  await sql`insert into users (system_user_id, system_uuid, full_name)
            select 'b-' || i, gen_random_uuid(), 'Bench ' || i from generate_series(0, 9999) i`
  await sql`insert into conspectuses (user_id, cue_sheet, dense_paragraph, bullets, slot, next_review_at, created_at, updated_at)
            select u.client_uuid, '{"topic":"t"}', 'paragraph', '{a,b}', 'A', now() - (i || ' minutes')::interval, now(), now()
            from users u, generate_series(1, 10) i`
  await sql`insert into conspectuses (user_id, cue_sheet, dense_paragraph, bullets, slot, next_review_at, created_at, updated_at)
            select u.client_uuid, '{"topic":"t"}', 'paragraph', '{a,b}', 'A', now() - (i || ' minutes')::interval, now(), now()
            from users u, generate_series(11, 60) i where u.system_user_id = ${DUE_LIST_LEARNER}`
  await sql`insert into conspectuses (user_id, cue_sheet, dense_paragraph, bullets, slot, next_review_at, last_reviewed_at,
                                      review_count, created_at, updated_at, schedule_policy, desired_retention, fsrs_state,
                                      fsrs_stability, fsrs_difficulty, fsrs_reps, fsrs_lapses)
            select u.client_uuid, '{"topic":"t"}', 'paragraph', '{a,b}', 'B', now() - interval '1 day', now() - interval '6 days',
                   3, now() - interval '20 days', now(), 'fsrs', 0.9, 'review', 5.2, 4.8, 3, 0
            from users u where u.system_user_id <> ${DUE_LIST_LEARNER}`
  // A day of earlier writes: the replay lookup runs on a table of realistic size from the start.
  await sql`insert into idempotency_records (key_id, scope, idempotency_key, request_hash, status_code, response_body, expires_at)
            select 'earlier-partner', '/api/v1/user', 'earlier-' || i, md5(i::text), 201, '{}', now() + interval '12 hours'
            from generate_series(1, 100000) i`
  await sql`insert into api_keys (id, prefix, scopes, created_by)
            select 'bench-partner-' || i, 'ssk_bnch', '{users:read}', 'bench' from generate_series(1, 10000) i`
  await sql`insert into api_key_secrets (digest, key_id)
            select sha256(('ssk_bench_' || i)::bytea), 'bench-partner-' || i from generate_series(1, 10000) i`
  await sql`vacuum analyze`
  return {
    url,
    sql,
    async copy() {
      const copy = `${name}_${randomBytes(3).toString('hex')}`
      await admin.unsafe(`create database "${copy}" template "${name}" strategy file_copy`)
      const copySql = postgres(databaseUrl(copy), { max: 2, onnotice: () => {} })
      const drop = async () => {
        await copySql.end()
        await admin.unsafe(`drop database if exists "${copy}" with (force)`)
      }
      return { url: databaseUrl(copy), sql: copySql, drop }
    },
    async settle() {
      await sql`vacuum analyze`
      await sql`checkpoint`
    },
    postgresPinned: pin.pinned,
    setup: (setup) => pin.pinTo(SETUP_CPU[setup]),
    async drop() {
      await sql.end()
      await admin.unsafe(`drop database if exists "${name}" with (force)`)
      await admin.end()
      pin.restore()
    },
  }
}

/**
 * Pins the postmaster and its processes to the servers' core (backends forked later inherit the
 * postmaster's core); pinTo() moves them all to another core (the set-ups); drop() gives them back
 * the cores they had. Skipped, with a warning, when PostgreSQL is not a
 * local process this user may re-pin.
 */
async function pinPostgres(
  sql: postgres.Sql,
): Promise<{ pinned: boolean; pinTo(cpus: string): void; restore(): void }> {
  const [{ pid }] = (await sql`select pg_backend_pid() as pid`) as unknown as [{ pid: number }]
  const proc = (p: number, file: string) => readFileSync(`/proc/${p}/${file}`, 'utf8')
  const taskset = (...args: string[]) =>
    execFileSync('taskset', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
  try {
    const postmaster = Number(/PPid:\s+(\d+)/.exec(proc(pid, 'status'))![1])
    if (proc(pid, 'comm').trim() !== 'postgres' || proc(postmaster, 'comm').trim() !== 'postgres')
      throw new Error('not a local PostgreSQL')
    const family = () => [
      postmaster,
      ...proc(postmaster, `task/${postmaster}/children`).split(' ').filter(Boolean).map(Number),
    ]
    const pinAll = (cpus: string) => {
      for (const p of family()) {
        try {
          taskset('-a', '-p', '-c', cpus, String(p))
        } catch {} // a backend that has just exited
      }
    }
    const original = /list:\s*(\S+)/.exec(taskset('-c', '-p', String(postmaster)))![1]!
    pinAll(SERVER_CPU)
    // An interrupted bench (Ctrl-C) must not leave the machine's PostgreSQL on one core.
    const onSignal = (signal: NodeJS.Signals) => {
      pinAll(original)
      for (const child of children) child.kill('SIGTERM')
      process.exit(signal === 'SIGINT' ? 130 : 143)
    }
    process.once('SIGINT', onSignal).once('SIGTERM', onSignal)
    return {
      pinned: true,
      pinTo: pinAll,
      restore() {
        process.off('SIGINT', onSignal).off('SIGTERM', onSignal)
        pinAll(original)
      },
    }
  } catch (err) {
    console.warn(
      `PostgreSQL not pinned to core ${SERVER_CPU} (${(err as Error).message}): it shares both cores with the load generator`,
    )
    return { pinned: false, pinTo() {}, restore() {} }
  }
}

export type Server = { base: string; process: ChildProcess }

/** Starts `node <args>` on SERVER_CPU with PORT and DATABASE_URL set; resolves once /live answers. */
export async function startServer(label: string, args: string[], port: number, env: Record<string, string>) {
  const child = spawn('taskset', ['-c', SERVER_CPU, SERVER_NODE, ...args], {
    cwd: projectRoot,
    env: { ...process.env, PORT: String(port), ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  children.push(child)
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/live`)).ok)
        return { base: `http://127.0.0.1:${port}`, process: child } as Server
    } catch {}
    await sleep(100)
  }
  throw new Error(`${label} did not start`)
}

/**
 * BENCH_OTEL=<ratio> (e.g. 0.1 or 1): the service traces with that parent-based sampling ratio,
 * exporting OTLP/HTTP (protobuf, batched) to a sink in this driver process that reads and drops
 * every export. Unset: no OTEL_* variable reaches the service (tracing off).
 */
async function otelEnv(ratio = process.env.BENCH_OTEL): Promise<Record<string, string>> {
  if (!ratio) return {}
  const sink = createHttpServer((req, res) => {
    req.resume()
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end())
  })
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve))
  sink.unref()
  const { port } = sink.address() as { port: number }
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: ratio,
  }
}

/** The service as built by `make build`, or another build's `entry`; PROFILE_DIR adds a V8 CPU profile
 * written at exit. `otel`: the sampling ratio (default BENCH_OTEL; '' untraced); `env`: more configuration. */
export async function startService(
  databaseUrl: string,
  port: number,
  profileDir?: string,
  otel = process.env.BENCH_OTEL,
  env: Record<string, string> = {},
  entry = 'dist/src/server.js',
): Promise<Server> {
  const profile = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(profileDir)}`] : []
  // BENCH_NODE_OPTIONS: extra Node flags for the service, space-separated.
  const options = (process.env.BENCH_NODE_OPTIONS ?? '').split(' ').filter(Boolean)
  return startServer('service', [...options, ...profile, entry], port, {
    DATABASE_URL: databaseUrl,
    API_KEYS: API_KEY,
    RATE_LIMIT_MAX: '10000000',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn',
    SHUTDOWN_DRAIN_MS: '0',
    ...(await otelEnv(otel)),
    ...env,
  })
}

/** The bare-stack ceiling (bench/ceiling-server.ts); its replay route reads the answers stored for the service's bench key. */
export function startCeiling(databaseUrl: string, port: number, nodeArgs: string[] = []): Promise<Server> {
  return startServer('ceiling', [...nodeArgs, '--import', 'tsx', 'bench/ceiling-server.ts'], port, {
    DATABASE_URL: databaseUrl,
    REPLAY_KEY_ID: legacyKeyId(API_KEY),
  })
}

/** SIGTERM to every server started here; resolves when all have exited (profiles are written on exit). */
export async function stopServers(): Promise<void> {
  const running = children.filter((child) => child.exitCode === null && child.signalCode === null)
  await Promise.all(running.map((child) => new Promise((resolve) => child.once('exit', resolve).kill('SIGTERM'))))
}

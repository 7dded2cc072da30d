// A private Patroni cluster for failover drills: one etcd member, three Patroni nodes (each with
// its PostgreSQL) and HAProxy in front, all on free local ports under one temporary folder, run
// from the files in deploy/ with local addresses and folders, trust authentication and the
// timing the caller gives. Everything started here is stopped by its process id at the end.
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process'
import { connect } from 'node:net'
import { cpSync, existsSync, mkdirSync, symlinkSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import type { Test } from 'tap'
import YAML from 'yaml'
import { projectRoot } from '../../src/paths.js'
import { postgresOwnedDir } from './private-replication.js'
import { freePort } from './server-process.js'
import { waitFor } from './wait.js'

const execFileAsync = promisify(execFile)
const PATRONI_PACKAGE = '/usr/lib/python3/dist-packages/patroni'
const POSTGRES_BIN = '/usr/lib/postgresql/15/bin'
const DEPLOY = path.join(projectRoot, 'deploy')
/** The cluster's name, as in deploy/patroni/ (patronictl's commands name it). */
const SCOPE = 'study'
export const HAPROXY_POSTGRES_CONFIG = path.join(DEPLOY, 'haproxy-postgres.cfg')

/** Registers what stops a started process. */
type OnStop = (stop: () => unknown) => void

/** Patroni's leader-key timing (bootstrap.dcs): loop_wait + 2 * retry_timeout <= ttl. */
export interface PatroniTiming {
  ttl: number
  loop_wait: number
  retry_timeout: number
}

export interface PatroniNode {
  name: string
  pgPort: number
  apiPort: number
  url: string
  config: string
  /** Patroni's own process id (PostgreSQL runs as its child). */
  patroniPid: number
  /** The postmaster's process id, read from postmaster.pid (it changes when Patroni restarts PostgreSQL). */
  postmasterPid(): number
  /** Patroni and every PostgreSQL process of this node, the postmaster first. */
  processes(): number[]
  /** GET on Patroni's REST API: the status code, or 0 when it does not answer within `timeoutMs`. */
  api(route: string, timeoutMs?: number): Promise<{ status: number; body: unknown }>
  output(): string
}

export interface PatroniCluster {
  nodes: PatroniNode[]
  /** postgres:// URL of HAProxy, which forwards to the node whose /primary answers 200. */
  balancerUrl: string
  etcdUrl: string
  /** The node holding the leader key, from Patroni's view of the cluster (undefined while none does). */
  leader(): Promise<PatroniNode | undefined>
  /** Waits until one node leads and another is its streaming synchronous standby. */
  healthy(timeoutMs?: number): Promise<{ leader: PatroniNode; standby: PatroniNode }>
  /**
   * Runs a shell script as an operator would on a node (bash, failing on the first error), with
   * `PATRONI_CONFIG` naming a node's Patroni file and `env` beside it; resolves to its output.
   */
  run(script: string, env?: Record<string, string>): Promise<string>
  /** `patronictl reinit <scope> <node> --force`: Patroni clones that standby again from the leader. */
  reinit(node: PatroniNode): Promise<string>
  /** Whether `node` replicates from the leader: a standby on the leader's timeline, less than 1 MiB behind. */
  replicating(node: PatroniNode): Promise<boolean>
  /** Waits until one node leads and every other one replicates from it. */
  complete(timeoutMs?: number): Promise<void>
  /** `node` as GET /cluster lists it (role, state, timeline, lag in bytes); undefined when not listed. */
  memberState(node: PatroniNode): Promise<Member | undefined>
  haproxyOutput(): string
  /** Stops everything started (the test's teardown does it too). */
  stop(): Promise<void>
}

function postgresIds(): { uid: number; gid: number } {
  return {
    uid: Number(execFileSync('id', ['-u', 'postgres']).toString()),
    gid: Number(execFileSync('id', ['-g', 'postgres']).toString()),
  }
}

/** A child's output kept in memory, for a failure's message. */
function collect(child: ChildProcess): () => string {
  let log = ''
  const keep = (d: Buffer) => {
    log += d
    if (log.length > 200_000) log = log.slice(-100_000)
  }
  child.stdout?.on('data', keep)
  child.stderr?.on('data', keep)
  return () => log
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Every descendant of `pid`, from /proc (parents before children). */
export function descendants(pid: number): number[] {
  const parentOf = new Map<number, number>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      parentOf.set(Number(entry), ppid)
    } catch {
      // exited meanwhile
    }
  }
  const found: number[] = []
  const queue = [pid]
  while (queue.length > 0) {
    const parent = queue.shift()!
    for (const [child, ppid] of parentOf) {
      if (ppid === parent) {
        found.push(child)
        queue.push(child)
      }
    }
  }
  return found
}

/** Stops `pid` (resumed first, in case a drill froze it) and waits for it to be gone. */
async function stopPid(pid: number, signal: NodeJS.Signals) {
  if (!alive(pid)) return
  try {
    process.kill(pid, 'SIGCONT')
    process.kill(pid, signal)
  } catch {
    return
  }
  for (let i = 0; i < 100 && alive(pid); i++) await sleep(50)
}

/**
 * The folder to put first on Patroni's PYTHONPATH: Debian's Patroni, copied, with
 * patches/patroni+3.0.2.patch applied when the installed one is 3.0.2 (its etcd3 leader-key
 * update could overwrite another node's key; fixed upstream in 3.0.3). Without it, the freeze
 * drill's old primary can take the leader key back from the node just promoted.
 */
function patchedPatroni(dir: string): string {
  const version = execFileSync('patroni', ['--version']).toString().trim()
  const python = path.join(dir, 'python')
  if (version !== 'patroni 3.0.2' || process.env.DRILL_PATRONI_UNPATCHED === '1') return python
  cpSync(PATRONI_PACKAGE, path.join(python, 'patroni'), { recursive: true })
  execFileSync('patch', ['-p1', '-s', '-d', python, '-i', path.join(projectRoot, 'patches', 'patroni+3.0.2.patch')])
  // Owned by the postgres user, so the nodes can keep their compiled modules beside it.
  execFileSync('chown', ['-R', 'postgres:postgres', python])
  return python
}

/**
 * PostgreSQL's programs for the drill's nodes: Debian's, with pg_rewind told not to fsync what it
 * rewrote (seconds on a busy disk; a drill kills processes, never the machine).
 */
function drillBinDir(dir: string): string {
  const bin = path.join(dir, 'bin')
  if (existsSync(bin)) return bin
  mkdirSync(bin)
  for (const program of readdirSync(POSTGRES_BIN))
    symlinkSync(path.join(POSTGRES_BIN, program), path.join(bin, program))
  rmSync(path.join(bin, 'pg_rewind'))
  // --no-sync last, so that Patroni's `pg_rewind --help` probe still has --help first (else
  // pg_rewind refuses it, and Patroni concludes that it cannot rewind).
  writeFileSync(path.join(bin, 'pg_rewind'), `#!/bin/sh\nexec ${POSTGRES_BIN}/pg_rewind "$@" --no-sync\n`, {
    mode: 0o755,
  })
  return bin
}

async function startEtcd(onStop: OnStop, dir: string): Promise<string> {
  const [clientPort, peerPort] = [await freePort(), await freePort()]
  const config = YAML.parse(readFileSync(path.join(DEPLOY, 'etcd', 'etcd.conf.yml'), 'utf8'))
  Object.assign(config, {
    name: 'drill',
    'data-dir': path.join(dir, 'etcd'),
    'listen-client-urls': `http://127.0.0.1:${clientPort}`,
    'advertise-client-urls': `http://127.0.0.1:${clientPort}`,
    'listen-peer-urls': `http://127.0.0.1:${peerPort}`,
    'initial-advertise-peer-urls': `http://127.0.0.1:${peerPort}`,
    'initial-cluster': `drill=http://127.0.0.1:${peerPort}`,
    'log-level': 'warn',
  })
  const file = path.join(dir, 'etcd.conf.yml')
  writeFileSync(file, YAML.stringify(config))
  const child = spawn('etcd', ['--config-file', file], { stdio: ['ignore', 'pipe', 'pipe'] })
  const output = collect(child)
  onStop(() => stopPid(child.pid!, 'SIGKILL'))
  const url = `http://127.0.0.1:${clientPort}`
  await waitFor(
    `etcd answering on ${url}`,
    async () => {
      if (child.exitCode !== null) throw new Error(`etcd exited: ${output()}`)
      try {
        return (await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) })).ok
      } catch {
        return false
      }
    },
    { timeoutMs: 30_000, everyMs: 100 },
  )
  return url
}

interface NodePorts {
  pgPort: number
  apiPort: number
}

/** deploy/patroni/<name>.yml with the drill's addresses, folders, authentication and timing. */
function drillConfig(name: string, dir: string, ports: NodePorts, etcdPort: number, timing: PatroniTiming) {
  const config = YAML.parse(readFileSync(path.join(DEPLOY, 'patroni', `${name}.yml`), 'utf8'))
  config.scope = SCOPE
  config.restapi = { listen: `127.0.0.1:${ports.apiPort}`, connect_address: `127.0.0.1:${ports.apiPort}` }
  config.etcd3 = { hosts: `127.0.0.1:${etcdPort}` }
  Object.assign(config.bootstrap.dcs, timing)
  const parameters = config.bootstrap.dcs.postgresql.parameters
  // No pgBackRest repository here; a small server that skips fsync (a drill kills processes,
  // never the machine, so the page cache keeps what was written).
  parameters.archive_mode = 'off'
  delete parameters.archive_command
  Object.assign(parameters, { max_connections: 50, wal_keep_size: '64MB', fsync: 'off', shared_buffers: '32MB' })
  config.postgresql = {
    ...config.postgresql,
    listen: `127.0.0.1:${ports.pgPort}`,
    connect_address: `127.0.0.1:${ports.pgPort}`,
    data_dir: path.join(dir, name),
    bin_dir: drillBinDir(dir),
    pgpass: path.join(dir, `pgpass-${name}`),
    pg_hba: [
      'local all all trust',
      'host replication replicator 127.0.0.1/32 trust',
      'host all all 127.0.0.1/32 trust',
    ],
    // Its socket in the drill's folder, beside nobody else's.
    parameters: { unix_socket_directories: dir },
  }
  config.watchdog = { mode: 'off' }
  config.log = { level: 'INFO', format: '%(asctime)s %(levelname)s: %(message)s' }
  return config
}

async function startNode(
  onStop: OnStop,
  name: string,
  dir: string,
  ports: NodePorts,
  etcdPort: number,
  timing: PatroniTiming,
  pythonPath: string,
): Promise<PatroniNode> {
  const config = path.join(dir, `${name}.yml`)
  writeFileSync(config, YAML.stringify(drillConfig(name, dir, ports, etcdPort, timing)))
  const { uid, gid } = postgresIds()
  const child = spawn('patroni', [config], {
    uid,
    gid,
    cwd: dir,
    env: { PATH: '/usr/bin:/bin', HOME: dir, LANG: 'C.UTF-8', PYTHONPATH: pythonPath },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const output = collect(child)
  const data = path.join(dir, name)
  const postmasterPid = () => Number(readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0])
  onStop(async () => {
    // Patroni first (so it does not restart PostgreSQL), then what is left of its PostgreSQL.
    let postmaster = 0
    try {
      postmaster = postmasterPid()
    } catch {
      // not running
    }
    const children = descendants(child.pid!)
    await stopPid(child.pid!, 'SIGKILL')
    if (postmaster) await stopPid(postmaster, 'SIGQUIT')
    for (const pid of children) await stopPid(pid, 'SIGKILL')
  })
  const base = `http://127.0.0.1:${ports.apiPort}`
  return {
    name,
    ...ports,
    url: `postgres://postgres@127.0.0.1:${ports.pgPort}/postgres`,
    config,
    patroniPid: child.pid!,
    postmasterPid,
    processes: () => {
      const postmaster = postmasterPid()
      return [postmaster, ...descendants(postmaster), child.pid!]
    },
    api: async (route, timeoutMs = 1000) => {
      try {
        const res = await fetch(`${base}${route}`, { signal: AbortSignal.timeout(timeoutMs) })
        const text = await res.text()
        let body: unknown = text
        try {
          body = JSON.parse(text)
        } catch {
          // not JSON
        }
        return { status: res.status, body }
      } catch {
        return { status: 0, body: undefined }
      }
    },
    output,
  }
}

/** Whether something accepts TCP connections on 127.0.0.1:port. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

async function startBalancer(onStop: OnStop, nodes: PatroniNode[], checkInterMs: number) {
  const port = await freePort()
  const env = {
    ...process.env,
    PG_BIND: `127.0.0.1:${port}`,
    DB1: `127.0.0.1:${nodes[0]!.pgPort}`,
    DB1_API_PORT: String(nodes[0]!.apiPort),
    DB2: `127.0.0.1:${nodes[1]!.pgPort}`,
    DB2_API_PORT: String(nodes[1]!.apiPort),
    DB3: `127.0.0.1:${nodes[2]!.pgPort}`,
    DB3_API_PORT: String(nodes[2]!.apiPort),
    CHECK_INTER_MS: String(checkInterMs),
  }
  const child = spawn('haproxy', ['-db', '-f', HAPROXY_POSTGRES_CONFIG], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  const output = collect(child)
  onStop(() => stopPid(child.pid!, 'SIGKILL'))
  await waitFor(
    'HAProxy listening',
    () => {
      if (child.exitCode !== null) throw new Error(`haproxy exited: ${output()}`)
      return accepts(port)
    },
    { timeoutMs: 10_000, everyMs: 50 },
  )
  return { url: `postgres://postgres@127.0.0.1:${port}/postgres`, output }
}

/** Members as Patroni's REST API lists them (GET /cluster). */
export interface Member {
  name: string
  role: string
  state: string
  timeline?: number
  lag?: number | string
}

function isLeader(all: Member[], name: string): boolean {
  return all.some((m) => m.name === name && m.role === 'leader' && m.state === 'running')
}

function replicating(all: Member[], name: string): boolean {
  const leader = all.find((m) => m.role === 'leader')
  const member = all.find((m) => m.name === name)
  return Boolean(
    leader &&
      member &&
      member !== leader &&
      member.state === 'running' &&
      member.timeline === leader.timeline &&
      typeof member.lag === 'number' &&
      member.lag < 1_048_576,
  )
}

export async function startPatroniCluster(
  t: Test,
  { timing, checkInterMs }: { timing: PatroniTiming; checkInterMs: number },
): Promise<PatroniCluster> {
  if (timing.loop_wait + 2 * timing.retry_timeout > timing.ttl) throw new Error('loop_wait + 2 * retry_timeout > ttl')
  const dir = postgresOwnedDir('study-patroni-')
  // Everything started is stopped at the end, or at once when the start fails (a failed start
  // must not leave etcd or Patroni running: the test file ends before any teardown would).
  const stops: (() => unknown)[] = []
  const onStop: OnStop = (stop) => stops.push(stop)
  const stopAll = async () => {
    for (const stop of stops.splice(0).reverse()) await stop()
  }
  t.teardown(stopAll)
  onStop(() => {
    // DRILL_LOG_DIR keeps each process's output for a look after the run.
    const keep = process.env.DRILL_LOG_DIR
    if (keep) {
      mkdirSync(keep, { recursive: true })
      for (const node of nodes) writeFileSync(path.join(keep, `${node.name}.log`), node.output())
      if (balancer) writeFileSync(path.join(keep, 'haproxy.log'), balancer.output())
    }
    rmSync(dir, { recursive: true, force: true })
  })
  const nodes: PatroniNode[] = []
  let balancer: { url: string; output: () => string } | undefined
  try {
    const cluster = await startProcesses(onStop, dir, nodes, timing, checkInterMs, (started) => {
      balancer = started
    })
    return { ...cluster, stop: stopAll }
  } catch (err) {
    await stopAll()
    throw err
  }
}

async function startProcesses(
  onStop: OnStop,
  dir: string,
  nodes: PatroniNode[],
  timing: PatroniTiming,
  checkInterMs: number,
  balancerStarted: (balancer: { url: string; output: () => string }) => void,
): Promise<Omit<PatroniCluster, 'stop'>> {
  const pythonPath = patchedPatroni(dir)
  const etcdUrl = await startEtcd(onStop, dir)
  const etcdPort = Number(new URL(etcdUrl).port)
  // The first node bootstraps the cluster (initdb); the other two then clone it (pg_basebackup), together.
  const start = async (name: string) =>
    startNode(onStop, name, dir, { pgPort: await freePort(), apiPort: await freePort() }, etcdPort, timing, pythonPath)
  const first = await start('db1')
  nodes.push(first)
  await waitFor('db1 leading', async () => (await first.api('/primary')).status === 200, {
    timeoutMs: 60_000,
    everyMs: 200,
  }).catch((err) => {
    throw new Error(`${err.message}\n${first.output()}`)
  })
  nodes.push(...(await Promise.all([start('db2'), start('db3')])))
  const balancer = await startBalancer(onStop, nodes, checkInterMs)
  balancerStarted(balancer)

  const patronictl = async (...args: string[]) =>
    (
      await execFileAsync('patronictl', ['-c', nodes[0]!.config, ...args], {
        env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', PYTHONPATH: pythonPath },
        timeout: 60_000,
      })
    ).stdout
  const members = async (): Promise<Member[]> => {
    for (const node of nodes) {
      const { status, body } = await node.api('/cluster')
      if (status === 200) return (body as { members: Member[] }).members
    }
    return []
  }
  const cluster: Omit<PatroniCluster, 'stop'> = {
    nodes,
    balancerUrl: balancer.url,
    etcdUrl,
    leader: async () => {
      const leader = (await members()).find((m) => m.role === 'leader' && m.state === 'running')
      return nodes.find((n) => n.name === leader?.name)
    },
    healthy: async (timeoutMs = 60_000) => {
      try {
        return await waitFor(
          'a leader and its streaming synchronous standby',
          async () => {
            const all = await members()
            const leader = all.find((m) => m.role === 'leader' && m.state === 'running')
            const standby = all.find((m) => m.role === 'sync_standby' && ['streaming', 'running'].includes(m.state))
            if (!leader || !standby) return false
            const byName = (name: string) => nodes.find((n) => n.name === name)!
            return { leader: byName(leader.name), standby: byName(standby.name) }
          },
          { timeoutMs, everyMs: 200 },
        )
      } catch (err) {
        throw new Error(
          `${(err as Error).message}: ${JSON.stringify(await members())}\n${nodes.map((n) => `--- ${n.name}\n${n.output().slice(-4000)}`).join('\n')}`,
        )
      }
    },
    run: async (script, env = {}) =>
      (
        await execFileAsync('bash', ['-euo', 'pipefail', '-c', script], {
          env: {
            PATH: '/usr/bin:/bin',
            LANG: 'C.UTF-8',
            PYTHONPATH: pythonPath,
            PATRONI_CONFIG: nodes[0]!.config,
            ...env,
          },
          timeout: 60_000,
        })
      ).stdout,
    reinit: (node) => patronictl('reinit', SCOPE, node.name, '--force'),
    replicating: async (node) => replicating(await members(), node.name),
    complete: async (timeoutMs = 60_000) => {
      await waitFor(
        'every standby replicating from the leader',
        async () => {
          const all = await members()
          return all.length === nodes.length && nodes.every((n) => replicating(all, n.name) || isLeader(all, n.name))
        },
        { timeoutMs, everyMs: 200 },
      ).catch(async (err) => {
        throw new Error(`${err.message}: ${JSON.stringify(await members())}`)
      })
    },
    memberState: async (node) => (await members()).find((m) => m.name === node.name),
    haproxyOutput: balancer.output,
  }
  await cluster.healthy()
  // patronictl's first run compiles its modules: done here, so a drill's command starts at once.
  await patronictl('list')
  return cluster
}

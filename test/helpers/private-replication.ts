// A private primary with a synchronous hot standby (own folders and ports), for failover drills.
// Both run as the postgres user (PostgreSQL refuses root) in a temporary folder it owns.
import { execFileSync } from 'node:child_process'
import { appendFileSync, chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import type { Test } from 'tap'

const BIN = '/usr/lib/postgresql/15/bin'
const STANDBY_NAME = 'standby1'

export function asPostgres(cmd: string, args: string[]): string {
  return execFileSync('runuser', ['-u', 'postgres', '--', path.join(BIN, cmd), ...args], { stdio: 'pipe' }).toString()
}

/** A temporary folder owned by the postgres user (the caller removes it). */
export function postgresOwnedDir(prefix: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix))
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString())
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString())
  chownSync(dir, uid, gid)
  return dir
}

export interface Node {
  port: number
  data: string
  url: string
  /** The postmaster's process id (first line of postmaster.pid). */
  postmasterPid(): number
}

/** Starts the cluster in `data` on `port`, its socket and log in `dir`, with `settings` (name=value). */
export function startNode(dir: string, data: string, port: number, settings: string[]) {
  asPostgres('pg_ctl', [
    '-D',
    data,
    '-o',
    [`-p ${port}`, `-k ${dir}`, '-c listen_addresses=127.0.0.1', ...settings.map((s) => `-c ${s}`)].join(' '),
    '-l',
    path.join(dir, `log-${port}`),
    '-w',
    'start',
  ])
}

function node(data: string, port: number): Node {
  return {
    port,
    data,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    postmasterPid: () => Number(readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]),
  }
}

/**
 * initdb a primary, pg_basebackup a standby from it, start both; every commit on the primary
 * waits for the standby's flush (synchronous_commit on, the standby named in
 * synchronous_standby_names), so an acknowledged commit survives the primary's loss.
 */
export async function startPrimaryAndStandby(
  t: Test,
  ports: [number, number],
): Promise<{ primary: Node; standby: Node; promoteStandby(): void }> {
  const dir = postgresOwnedDir('study-repl-')
  const primary = node(path.join(dir, 'primary'), ports[0])
  const standby = node(path.join(dir, 'standby'), ports[1])
  t.teardown(() => {
    stopQuietly(standby.data)
    stopQuietly(primary.data)
    rmSync(dir, { recursive: true, force: true })
  })
  asPostgres('initdb', ['-D', primary.data, '-A', 'trust', '-U', 'postgres'])
  const shared = ['wal_level=replica', 'max_wal_senders=4', 'wal_keep_size=64MB', 'fsync=off']
  startNode(dir, primary.data, primary.port, [
    ...shared,
    `synchronous_standby_names=${STANDBY_NAME}`,
    'synchronous_commit=on',
  ])
  asPostgres('pg_basebackup', [
    '-h',
    '127.0.0.1',
    '-p',
    String(primary.port),
    '-U',
    'postgres',
    '-D',
    standby.data,
    '-R',
    '-X',
    'stream',
  ])
  // The standby names itself so the primary counts it as the synchronous one.
  appendFileSync(
    path.join(standby.data, 'postgresql.auto.conf'),
    `primary_conninfo = 'host=127.0.0.1 port=${primary.port} user=postgres application_name=${STANDBY_NAME}'\n`,
  )
  startNode(dir, standby.data, standby.port, [...shared, 'hot_standby=on'])

  const admin = postgres(primary.url, { max: 1, onnotice: () => {} })
  try {
    for (let i = 0; ; i++) {
      const rows = await admin`select sync_state from pg_stat_replication where application_name = ${STANDBY_NAME}`
      if (rows[0]?.sync_state === 'sync') break
      if (i > 300) throw new Error('the standby never became synchronous')
      await sleep(100)
    }
  } finally {
    await admin.end({ timeout: 1 })
  }
  return {
    primary,
    standby,
    promoteStandby: () => asPostgres('pg_ctl', ['-D', standby.data, '-w', 'promote']),
  }
}

function stopQuietly(data: string) {
  try {
    asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop'])
  } catch {
    // already stopped (or killed by the drill)
  }
}

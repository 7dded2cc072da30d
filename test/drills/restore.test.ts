// Restore drill: a private cluster archives its WAL to a private pgBackRest repository; the
// service writes under load and every acknowledged write is recorded; a full backup is taken
// mid-load; load goes on; then the backup is restored into fresh folders (a) to the latest
// state and (b) to a point in time between two known writes, and the service started on each
// finds every write acknowledged before the target and, for (b), none after it. Prints RPO and
// RTO. pgBackRest runs as the postgres user with its configuration in the drill's folder.
// `make drill-restore` runs it alone (the runbook is docs/backup-and-restore.md).
import t from 'tap'
import { execFile } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { appendFileSync, writeFileSync, rmSync } from 'node:fs'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import postgres from 'postgres'
import { asPostgres, postgresOwnedDir, startNode } from '../helpers/private-replication.js'
import { freePort, startServer, type ServerProcess } from '../helpers/server-process.js'

const run = promisify(execFile)
const STANZA = 'drill'
const dir = postgresOwnedDir('study-restore-')
const config = path.join(dir, 'pgbackrest.conf')
const data = path.join(dir, 'data')
const port = await freePort()
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

writeFileSync(
  config,
  `[global]
repo1-path=${dir}/repo
repo1-retention-full=2
log-path=${dir}
lock-path=${dir}
spool-path=${dir}
log-level-console=warn
log-level-file=off
start-fast=y
# The drill's repository is a temporary folder: no compression keeps it within its time budget.
compress-type=none

[${STANZA}]
pg1-path=${data}
pg1-port=${port}
pg1-socket-path=${dir}
pg1-user=postgres
`,
)

/** pgBackRest as the postgres user, not blocking the event loop (the writers go on). */
const pgbackrest = (...args: string[]) =>
  run('runuser', ['-u', 'postgres', '--', 'pgbackrest', `--config=${config}`, `--stanza=${STANZA}`, ...args])

function startCluster(folder: string, clusterPort: number, settings: string[]) {
  startNode(dir, folder, clusterPort, settings)
  t.teardown(() => {
    try {
      asPostgres('pg_ctl', ['-D', folder, '-m', 'immediate', '-w', 'stop'])
    } catch {
      // already stopped
    }
  })
}

asPostgres('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres'])
// WAL archiving as deploy/pgbackrest/ configures it.
appendFileSync(
  path.join(data, 'postgresql.conf'),
  `wal_level = replica\narchive_mode = on\narchive_command = 'pgbackrest --config=${config} --stanza=${STANZA} archive-push %p'\n`,
)
// fsync off: a drill's cluster never outlives a crash of the machine; it shortens the backup.
startCluster(data, port, ['fsync=off'])
await pgbackrest('stanza-create')
await pgbackrest('check')

const system = randomUUID()
const writes: { key: string; ackedAt: number }[] = []
let pausedWriters = false
let stopping = false
let inFlight = 0

async function writer(server: ServerProcess, w: number) {
  for (let n = 0; !stopping; n++) {
    while (pausedWriters && !stopping) await sleep(10)
    if (stopping) break
    const key = `w${w}-${n}`
    inFlight++
    const res = await fetch(`${server.base}/api/v1/user`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'k', 'idempotency-key': key },
      body: JSON.stringify({ system_user_id: key, system_uuid: system, full_name: `Writer ${key}` }),
    })
    await res.arrayBuffer()
    inFlight--
    if (res.status !== 201) throw new Error(`write ${key} answered ${res.status}`)
    writes.push({ key, ackedAt: Date.now() })
  }
}

async function until(what: string, condition: () => boolean, limitMs = 60_000) {
  const start = Date.now()
  while (!condition()) {
    if (Date.now() - start > limitMs) throw new Error(`gave up waiting: ${what}`)
    await sleep(20)
  }
}

/** Restores the stanza into a fresh folder, starts it, waits for the end of recovery. */
async function restore(name: string, options: string[]) {
  const folder = path.join(dir, name)
  const restorePort = await freePort()
  const started = Date.now()
  await pgbackrest(`--pg1-path=${folder}`, 'restore', ...options)
  const copied = Date.now()
  // archive_mode off: the restored copy must not push WAL into the original's archive.
  startCluster(folder, restorePort, ['archive_mode=off'])
  const sql = postgres(`postgres://postgres@127.0.0.1:${restorePort}/postgres`, { max: 1, onnotice: () => {} })
  try {
    for (;;) {
      const [row] = await sql`select pg_is_in_recovery() as recovering`
      if (!row!.recovering) break
      await sleep(50)
    }
  } finally {
    await sql.end({ timeout: 1 })
  }
  return { port: restorePort, started, copySeconds: (copied - started) / 1000, recoveredAt: Date.now() }
}

/** The keys the service finds on a cluster (GET by key, through the service). */
async function found(server: ServerProcess, keys: string[]) {
  const present = new Set<string>()
  for (let i = 0; i < keys.length; i += 16) {
    await Promise.all(
      keys.slice(i, i + 16).map(async (key) => {
        const res = await fetch(`${server.base}/api/v1/user/${system}/${key}`, { headers: { 'x-api-key': 'k' } })
        await res.arrayBuffer()
        if (res.status === 200) present.add(key)
        else if (res.status !== 404) throw new Error(`GET ${key} answered ${res.status}`)
      }),
    )
  }
  return present
}

t.test('backup under load, restore to the latest state and to a point in time', async (t) => {
  const server = await startServer(t, {
    DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/postgres`,
    RATE_LIMIT_MAX: '10000000',
  })
  const writers = Array.from({ length: 2 }, (_, w) => writer(server, w))
  await until('load before the backup', () => writes.length >= 100)
  const backupStarted = Date.now()
  await pgbackrest('backup', '--type=full')
  const backupSeconds = (Date.now() - backupStarted) / 1000
  const backupEnded = Date.now()
  const duringBackup = writes.filter((w) => w.ackedAt > backupStarted).length
  const afterBackup = writes.length
  // pgBackRest keeps a backup's stop time in whole seconds and restores to a time only from a
  // backup that stopped before it: the target comes more than a second after the backup.
  await until(
    'load after the backup',
    () => writes.length >= afterBackup + 150 && writes.some((w) => w.ackedAt > backupEnded + 1_500),
  )

  // The point in time: writers paused with nothing in flight, so every write is either
  // acknowledged before it or made after it.
  pausedWriters = true
  await until('writers idle', () => inFlight === 0)
  const primary = postgres(`postgres://postgres@127.0.0.1:${port}/postgres`, { max: 1, onnotice: () => {} })
  t.teardown(() => primary.end({ timeout: 1 }))
  const [clock] = await primary<{ target: string }[]>`select clock_timestamp()::text as target`
  const target = clock!.target
  const beforeTarget = writes.map((w) => w.key)
  await sleep(20) // commits after the target get a strictly later timestamp
  pausedWriters = false
  await until('load after the target', () => writes.length >= beforeTarget.length + 150)
  stopping = true
  await Promise.all(writers)
  const all = writes.map((w) => w.key)
  const afterTarget = all.slice(beforeTarget.length)
  const lastAck = Math.max(...writes.map((w) => w.ackedAt))
  // A clean switch of WAL: the segment holding the last commits is archived (check waits for it).
  await pgbackrest('check')
  server.child.kill('SIGTERM')
  await server.exited

  // (a) the latest state
  const latest = await restore('restore-latest', ['--type=default'])
  const onLatest = await startServer(t, {
    DATABASE_URL: `postgres://postgres@127.0.0.1:${latest.port}/postgres`,
    RATE_LIMIT_MAX: '10000000',
  })
  const rtoLatest = (Date.now() - latest.started) / 1000
  const presentLatest = await found(onLatest, all)
  const lostLatest = all.filter((k) => !presentLatest.has(k))
  t.same(lostLatest, [], 'latest: every acknowledged write is there')
  onLatest.child.kill('SIGTERM')
  await onLatest.exited

  // (b) the point in time between two known writes
  const pitr = await restore('restore-pitr', ['--type=time', `--target=${target}`, '--target-action=promote'])
  const onPitr = await startServer(t, {
    DATABASE_URL: `postgres://postgres@127.0.0.1:${pitr.port}/postgres`,
    RATE_LIMIT_MAX: '10000000',
  })
  const rtoPitr = (Date.now() - pitr.started) / 1000
  const presentPitr = await found(onPitr, all)
  const missingBefore = beforeTarget.filter((k) => !presentPitr.has(k))
  const presentAfter = afterTarget.filter((k) => presentPitr.has(k))
  t.same(missingBefore, [], 'point in time: every write acknowledged before the target is there')
  t.same(presentAfter, [], 'point in time: no write made after the target is there')
  onPitr.child.kill('SIGTERM')
  await onPitr.exited

  t.comment(
    `writes acknowledged ${all.length} (${duringBackup} during the ${backupSeconds.toFixed(1)} s full backup, ` +
      `${beforeTarget.length} before the point-in-time target, ${afterTarget.length} after it)`,
  )
  t.comment(
    `latest: lost ${lostLatest.length} (RPO 0 writes; last acknowledgement ${((latest.started - lastAck) / 1000).toFixed(1)} s before the restore began), ` +
      `RTO ${rtoLatest.toFixed(1)} s (restore ${latest.copySeconds.toFixed(1)} s, then recovery, then the service's start)`,
  )
  t.comment(
    `point in time ${target}: before-target writes missing ${missingBefore.length}/${beforeTarget.length}, ` +
      `after-target writes present ${presentAfter.length}/${afterTarget.length}, RTO ${rtoPitr.toFixed(1)} s`,
  )
})

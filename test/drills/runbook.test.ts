// docs/backup-and-restore.md as an operator runs it on Debian: its `runbook` blocks, as written
// and in order, as root, on a Debian cluster `15/main` made with pg_createcluster on a free port.
// The Debian folders (/etc/postgresql, /var/lib/postgresql, /run/postgresql, pgBackRest's) are
// this test's own: the blocks run in a mount namespace where private folders are mounted over
// them, so the machine's clusters and files are untouched. Then: prometheus-postgres-exporter
// with deploy/'s queries exports what the alerts read, as they expect it; a restore to
// the latest state holds every row, and one to a point in time the rows before it and none after.
import { spawn } from 'node:child_process'
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { parse } from 'yaml'
import { projectRoot } from '../../src/paths.js'
import { freePort } from '../helpers/server-process.js'

const DEADLINE_MS = 300_000
t.setTimeout(DEADLINE_MS + 60_000)

const doc = readFileSync(path.join(projectRoot, 'docs/backup-and-restore.md'), 'utf8')
const blocks = new Map(
  [...doc.matchAll(/<!-- runbook: (\S+) -->\s*```sh\n([\s\S]*?)```/g)].map((m) => [m[1]!, m[2]!] as const),
)
const block = (name: string) => {
  const text = blocks.get(name)
  if (text === undefined) throw new Error(`docs/backup-and-restore.md has no runbook block "${name}"`)
  return `echo '### ${name}'\n${text}`
}
const queries = parse(
  readFileSync(path.join(projectRoot, 'deploy/prometheus/postgres-exporter-queries.yaml'), 'utf8'),
) as Record<string, { query: string }>

/** The folders of Debian's PostgreSQL and pgBackRest that the blocks write, made private. */
const DEBIAN_FOLDERS = [
  '/etc/postgresql',
  '/var/lib/postgresql',
  '/run/postgresql',
  '/var/log/postgresql',
  '/etc/pgbackrest',
  '/var/lib/pgbackrest',
  '/var/spool/pgbackrest',
  '/var/log/pgbackrest',
  '/tmp/pgbackrest',
]

t.test('the runbook, as written, backs up a Debian cluster and restores it twice', async (t) => {
  const own = mkdtempSync(path.join(os.tmpdir(), 'runbook-'))
  chmodSync(own, 0o755) // the postgres user walks through it to its folders
  t.teardown(() => rmSync(own, { recursive: true, force: true }))
  const [port, restoredPort, exporterPort] = [await freePort(), await freePort(), await freePort()]
  // The exporter runs as Debian's `prometheus` user, which must read its queries.
  copyFileSync(
    path.join(projectRoot, 'deploy/prometheus/postgres-exporter-queries.yaml'),
    path.join(own, 'queries.yaml'),
  )
  chmodSync(path.join(own, 'queries.yaml'), 0o644)
  const sql = (p: string, query: string) =>
    `runuser -u postgres -- psql -p ${p} -v ON_ERROR_STOP=1 -qAtc ${shellQuote(query)}`
  const script = `set -euo pipefail
for folder in ${DEBIAN_FOLDERS.join(' ')}; do
  mkdir -p "$folder" "${own}$folder"   # the mount point (left empty on the machine) and its private twin
  mount --bind "${own}$folder" "$folder"
done
chown postgres:postgres /etc/postgresql /var/lib/postgresql /run/postgresql /var/log/postgresql /tmp/pgbackrest
chmod 2775 /run/postgresql
EXPORTER=
trap '[ -z "$EXPORTER" ] || kill $EXPORTER; pg_dropcluster --stop 15 restored 2>/dev/null || true; pg_dropcluster --stop 15 main 2>/dev/null || true' EXIT
export PORT=${port} RESTORED_PORT=${restoredPort} CIPHER_PASS=drill-passphrase
cd ${shellQuote(projectRoot)}

# What the runbook starts from: a Debian cluster 15/main with data.
pg_createcluster 15 main -p $PORT --start > /dev/null
${sql('$PORT', 'create table drill (id int primary key)')}
${sql('$PORT', 'insert into drill values (1)')}

${block('set-up')}
${block('verify')}
${block('monitor')}
BACKUP_STOPPED=$(date +%s)
${sql('$PORT', 'insert into drill values (2)')}
# pgBackRest keeps a backup's stop time in whole seconds and restores to a time only from a
# backup that stopped before it: the target comes two seconds after.
until [ "$(date +%s)" -ge $((BACKUP_STOPPED + 2)) ]; do sleep 0.1; done
export TARGET_TIME=$(${sql('$PORT', 'select now()')})
${sql('$PORT', 'insert into drill values (3)')}
runuser -u postgres -- pgbackrest --stanza=study --pg1-port=$PORT check   # archives the segment holding row 3
${Object.entries(queries)
  .map(([name, { query }]) => `echo "QUERY ${name}: $(${sql('$PORT', `set role prometheus; ${query.trim()}`)})"`)
  .join('\n')}
# prometheus-postgres-exporter as Debian runs it (its own user, the local socket, peer
# authentication as the role monitor.sql made), with the queries; its /metrics as Prometheus reads it.
runuser -u prometheus -- env DATA_SOURCE_NAME="host=/run/postgresql port=$PORT user=prometheus dbname=postgres sslmode=disable" \
  prometheus-postgres-exporter --extend.query-path=${own}/queries.yaml --disable-default-metrics \
  --web.listen-address=127.0.0.1:${exporterPort} > ${own}/exporter.log 2>&1 &
EXPORTER=$!
for try in $(seq 100); do
  curl -sf http://127.0.0.1:${exporterPort}/metrics | grep -q '^pgbackrest_backup_last_stop_timestamp_seconds' && break
  sleep 0.2
done
curl -sf http://127.0.0.1:${exporterPort}/metrics | grep -E '^(pg_archiver|pgbackrest_backup)_' | sed 's/^/EXPORTED /' || cat ${own}/exporter.log
kill $EXPORTER && EXPORTER=

${block('new-cluster')}
${block('restore-latest')}
${block('start-restored')}
echo "LATEST $(${sql('$RESTORED_PORT', "select string_agg(id::text, ',' order by id) from drill")})"
pg_dropcluster --stop 15 restored

${block('new-cluster')}
${block('restore-time')}
${block('start-restored')}
echo "POINT IN TIME $(${sql('$RESTORED_PORT', "select string_agg(id::text, ',' order by id) from drill")})"
`
  writeFileSync(path.join(own, 'runbook.sh'), script)
  const started = Date.now()
  const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn('unshare', ['--mount', '--propagation', 'private', 'bash', path.join(own, 'runbook.sh')], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    child.stdout.on('data', (d) => (output += d))
    child.stderr.on('data', (d) => (output += d))
    const deadline = setTimeout(() => child.kill('SIGTERM'), DEADLINE_MS)
    child.on('close', (code) => {
      clearTimeout(deadline)
      resolve({ code, output })
    })
  })
  t.comment(`the runbook ran in ${((Date.now() - started) / 1000).toFixed(1)} s`)
  t.equal(code, 0, `every block succeeded\n${output}`)
  for (const name of ['set-up', 'verify', 'monitor', 'new-cluster', 'restore-latest', 'restore-time', 'start-restored'])
    t.match(output, `### ${name}\n`, `block ${name} ran`)

  const archiver = /^QUERY pg_archiver: (.*)$/m.exec(output)?.[1]?.split('|').map(Number)
  t.ok(archiver && archiver[0]! > 0, `pg_archiver: WAL archived (${archiver})`)
  t.equal(archiver?.[1], 0, 'pg_archiver: no failure, so PostgresWalArchivingFailing stays quiet')
  t.ok(
    archiver && Date.now() / 1000 - archiver[2]! < 600,
    'pg_archiver: archived just now, so PostgresWalArchiveStale stays quiet',
  )
  const backup = /^QUERY pgbackrest_backup: (.*)$/m.exec(output)?.[1]?.split('|')
  t.equal(backup?.[0], 'study', 'pgbackrest_backup: the stanza')
  const backupAge = Date.now() / 1000 - Number(backup?.[1])
  t.ok(backupAge >= 0 && backupAge < 600, `pgbackrest_backup: the backup ended ${backupAge.toFixed(0)} s ago`)

  const exported = (name: string) =>
    Number(new RegExp(`^EXPORTED ${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(output)?.[1])
  t.equal(exported('pg_archiver_failed_count'), 0, 'the exporter: no archiving failure')
  t.ok(exported('pg_archiver_archived_count') > 0, 'the exporter: WAL archived')
  t.ok(
    Date.now() / 1000 - exported('pg_archiver_last_archived_timestamp_seconds') < 600,
    'the exporter: the last archived segment is recent',
  )
  t.match(
    output,
    /^EXPORTED pgbackrest_backup_last_stop_timestamp_seconds\{.*stanza="study".*\} /m,
    'the exporter: per stanza',
  )
  t.ok(
    Date.now() / 1000 - exported('pgbackrest_backup_last_stop_timestamp_seconds') < 600,
    'the exporter: the newest backup is minutes old, so PgBackRestBackupTooOld stays quiet',
  )

  t.match(output, /^LATEST 1,2,3$/m, 'the latest state holds every row')
  t.match(output, /^POINT IN TIME 1,2$/m, 'the point in time holds the rows before it and none after')
})

function shellQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`
}

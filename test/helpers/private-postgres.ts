// A PostgreSQL instance of the test's own (own port and folder), so a test can stop and start
// it without touching the shared one. Runs as the postgres user: PostgreSQL refuses root.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, chownSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type { Test } from 'tap'

const BIN = '/usr/lib/postgresql/15/bin'

export interface PrivatePostgres {
  url: string
  start(): void
  stop(): void
}

function asPostgres(cmd: string, args: string[]) {
  execFileSync('runuser', ['-u', 'postgres', '--', path.join(BIN, cmd), ...args], { stdio: 'pipe' })
}

export function startPrivatePostgres(t: Test, port: number): PrivatePostgres {
  const dir = mkdtempSync(path.join(tmpdir(), 'study-pg-'))
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString())
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString())
  chownSync(dir, uid, gid)
  const data = path.join(dir, 'data')
  asPostgres('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres'])
  const pg = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start: () =>
      asPostgres('pg_ctl', [
        '-D',
        data,
        '-o',
        `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`,
        '-l',
        path.join(dir, 'log'),
        '-w',
        'start',
      ]),
    stop: () => asPostgres('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']),
  }
  pg.start()
  t.teardown(() => {
    try {
      asPostgres('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop'])
    } catch {
      // already stopped
    }
    rmSync(dir, { recursive: true, force: true })
  })
  return pg
}

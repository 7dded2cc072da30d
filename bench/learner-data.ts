// `make bench-learner-data`: the export of a learner with 10,000 notes and 1,000 error logs
// through the built service (a child process): wall time to the last byte and the server's
// resident-memory growth during it (peak RSS, VmHWM, reset before each run, minus the RSS before
// it), beside the document's size; then the erasure of that learner. Targets: export under 2 s,
// growth under 50 MB. Writes bench/learner-data.md.
import { execFileSync } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import postgres from 'postgres'
import { migrate } from '../src/db/migrate.js'
import { projectRoot } from '../src/paths.js'
import { ADMIN_URL, databaseUrl } from '../test/helpers/database.js'
import { API_KEY, median, startService, stopServers } from './harness.js'

const NOTES = Number(process.env.BENCH_NOTES ?? 10_000)
const LOGS = Number(process.env.BENCH_LOGS ?? 1_000)
const RUNS = Number(process.env.BENCH_RUNS ?? 5)
const PORT = Number(process.env.BENCH_PORT ?? 3191)

const status = (pid: number, field: string) =>
  Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024
const MB = 1e6

const name = `bench_learner_${randomBytes(3).toString('hex')}`
const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} })
await admin.unsafe(`create database "${name}"`)
const url = databaseUrl(name)
const sql = postgres(url, { max: 2, onnotice: () => {} })
try {
  await migrate(sql as never)
  const headers = { 'x-api-key': API_KEY, 'content-type': 'application/json' }
  // The same exports with V8's default young generation and with a small one: growth that
  // shrinks with it is garbage awaiting a scavenge, not memory held for the document.
  const configs = [
    { label: 'default V8 flags', flags: process.env.BENCH_NODE_OPTIONS ?? '' },
    { label: '--max-semi-space-size=2', flags: '--max-semi-space-size=2' },
  ]
  const results = []
  let server!: Awaited<ReturnType<typeof startService>>
  let pid = 0
  for (const config of configs) {
    process.env.BENCH_NODE_OPTIONS = config.flags
    server = await startService(url, PORT, undefined, '')
    pid = server.process.pid!
    for (const notes of [NOTES, NOTES * 4])
      results.push({ config: config.label, notes, ...(await benchLearner(notes)) })
    await stopServers()
  }
  report(results)

  async function benchLearner(NOTES: number) {
    const owner = { system_user_id: `export-bench-${NOTES}`, system_uuid: randomUUID() }
    const created = await fetch(`${server.base}/api/v1/user`, {
      method: 'POST',
      headers: { ...headers, 'idempotency-key': randomUUID() },
      body: JSON.stringify({ ...owner, full_name: 'Bench Learner' }),
    })
    if (created.status !== 201) throw new Error(`create user: ${created.status}`)
    // Notes of about 1 KB of JSON each: a paragraph, a cue sheet of three rows, five bullets.
    await sql`
    insert into conspectuses (user_id, title, cue_sheet, dense_paragraph, bullets, slot, next_review_at, created_at, updated_at)
    select u.client_uuid, 'Note ' || i,
           jsonb_build_object('topic', 'Topic ' || i, 'rows', jsonb_build_array(
             jsonb_build_object('keywords', 'k1', 'question', 'What is ' || i || '?', 'hint', 'h'),
             jsonb_build_object('keywords', 'k2', 'question', 'Why ' || i || '?', 'hint', 'h'),
             jsonb_build_object('keywords', 'k3', 'question', 'How ' || i || '?', 'hint', 'h'))),
           repeat('Plants turn light, water and CO2 into glucose. ', 10),
           array['Light reactions make ATP', 'The Calvin cycle fixes CO2', 'Chlorophyll absorbs red and blue',
                 'Stomata let CO2 in', 'Oxygen is a by-product'],
           'A', now() + interval '1 day', now() - (${NOTES} - i) * interval '1 second', now()
    from users u, generate_series(1, ${NOTES}) as i
    where u.system_user_id = ${owner.system_user_id}`
    await sql`
    insert into error_logs (user_id, message, context)
    select u.client_uuid, 'Mixed up step ' || i, jsonb_build_object('quiz', i)
    from users u, generate_series(1, ${LOGS}) as i
    where u.system_user_id = ${owner.system_user_id}`
    await sql`vacuum analyze`

    const exportUrl = `${server.base}/api/v1/user/${owner.system_uuid}/${owner.system_user_id}/export`
    async function exportOnce() {
      writeFileSync(`/proc/${pid}/clear_refs`, '5') // resets VmHWM to the current RSS
      const before = status(pid, 'VmRSS')
      const start = performance.now()
      const res = await fetch(exportUrl, { headers: { 'x-api-key': API_KEY } })
      if (res.status !== 200) throw new Error(`export: ${res.status}`)
      let bytes = 0
      for await (const chunk of res.body!) bytes += (chunk as Uint8Array).byteLength
      const seconds = (performance.now() - start) / 1000
      return { seconds, growth: status(pid, 'VmHWM') - before, bytes, rss: before }
    }
    await exportOnce() // warm-up: code paths compiled, pool connected
    const runs = []
    for (let i = 0; i < RUNS; i++) runs.push(await exportOnce())

    const eraseStart = performance.now()
    const erased = await fetch(`${server.base}/api/v1/user/${owner.system_uuid}/${owner.system_user_id}`, {
      method: 'DELETE',
      headers: { 'x-api-key': API_KEY },
    })
    const eraseSeconds = (performance.now() - eraseStart) / 1000
    const erasedBody = await erased.text()
    return { runs, eraseSeconds, erasedStatus: erased.status, erasedBody }
  }

  function report(
    results: {
      config: string
      notes: number
      runs: { seconds: number; growth: number; bytes: number; rss: number }[]
      eraseSeconds: number
      erasedStatus: number
      erasedBody: string
    }[],
  ) {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: projectRoot }).toString().trim()
    const cpu = os.cpus()[0]?.model ?? 'unknown CPU'
    const lines = [
      '# Learner export and erasure',
      '',
      `Written by \`make bench-learner-data\` (bench/learner-data.ts) on ${new Date().toISOString()}, commit`,
      `${commit}, ${os.cpus().length} × ${cpu}, Node ${process.version}, PostgreSQL local. The host is shared`,
      'with other work: times vary between runs; the memory figures do not depend on speed.',
      '',
      `Learners with ${NOTES.toLocaleString('en')} and ${(NOTES * 4).toLocaleString('en')} notes (about 1 KB of JSON each) and ${LOGS.toLocaleString('en')} error logs; the built`,
      'service (dist/) in a child process; each export read to its last byte by fetch. RSS growth is',
      "the server's peak resident memory during the export (VmHWM, reset before it) minus its RSS",
      `before it. Targets: under 2 s, under 50 MB.`,
      '',
      '| Server | Notes | Run | Time to last byte | RSS before | RSS growth | Document |',
      '| --- | --- | --- | --- | --- | --- | --- |',
      ...results.flatMap(({ config, notes, runs }) => [
        ...runs.map(
          (r, i) =>
            `| ${config} | ${notes.toLocaleString('en')} | ${i + 1} | ${r.seconds.toFixed(2)} s | ${(r.rss / MB).toFixed(0)} MB | ${(r.growth / MB).toFixed(1)} MB | ${(r.bytes / MB).toFixed(1)} MB |`,
        ),
        `| ${config} | ${notes.toLocaleString('en')} | median | ${median(runs.map((r) => r.seconds)).toFixed(2)} s | | ${(median(runs.map((r) => r.growth)) / MB).toFixed(1)} MB | |`,
      ]),
      '',
      ...configs.map(({ label }) => {
        const [small, large] = results.filter((r) => r.config === label)
        const growth = (r: typeof small) => median(r!.runs.map((x) => x.growth))
        const time = (r: typeof small) => median(r!.runs.map((x) => x.seconds))
        return `${label}: ${(large!.notes / small!.notes).toFixed(0)}× the notes, ${(growth(large) / growth(small)).toFixed(2)}× the median RSS growth, ${(time(large) / time(small)).toFixed(2)}× the median time.`
      }),
      '',
      ...results.map(
        (r) =>
          `Erasure of the learner with ${r.notes.toLocaleString('en')} notes (${r.config}; one transaction): ${r.eraseSeconds.toFixed(2)} s, answered ${r.erasedStatus} \`${r.erasedBody}\`.`,
      ),
      '',
    ]
    writeFileSync(path.join(projectRoot, 'bench', 'learner-data.md'), lines.join('\n'))
    process.stdout.write(lines.join('\n'))
  }
} finally {
  await stopServers()
  await sql.end()
  await admin.unsafe(`drop database if exists "${name}" with (force)`)
  await admin.end()
}

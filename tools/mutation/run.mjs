// `make mutation`: StrykerJS over each module in turn (MUTATION_MODULES, all by default), then
// bench/mutation.md rewritten from the modules' incremental files (the full reports): score per
// module and every surviving or uncovered mutant, with the reason it is accepted from
// accepted.json (key: "file:line:column mutator -> replacement", the line where that code is now),
// or "not reviewed". The incremental files are a local cache (git-ignored), written by the run:
// a module not run on this checkout keeps its row, and its remaining mutants, from the report.
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import os from 'node:os'

const ALL = ['idempotency', 'auth', 'telemetry-lifecycle', 'telemetry-erasure', 'users', 'conspectuses']
const chosen = (process.env.MUTATION_MODULES ?? '').split(/[\s,]+/).filter(Boolean)
const modules = chosen.length > 0 ? chosen : ALL
const report = 'bench/mutation.md'
const incremental = (m) => `tools/mutation/incremental/${m}.json`
const accepted = JSON.parse(readFileSync('tools/mutation/accepted.json', 'utf8'))

// Seconds per module from earlier runs stay in the report when only some modules run now.
const previous = existsSync(report) ? readFileSync(report, 'utf8') : ''
const seconds = Object.fromEntries(
  [...previous.matchAll(/^\| (\S+) \| .* \| (\d+) s \|$/gm)].map((m) => [m[1], Number(m[2])]),
)
// A module's rows from the report as it stands: kept when this checkout has no results for it.
const previousRow = Object.fromEntries([...previous.matchAll(/^\| (\S+) \| [\d.]+ % \|.*$/gm)].map((m) => [m[1], m[0]]))
const previousRemaining = (m) => previous.split('\n').filter((line) => line.startsWith(`| ${m} | \``))
mkdirSync('tools/mutation/incremental', { recursive: true })
const ranAt = {}
const reportOnly = process.argv.includes('--report-only')
const ranges = (process.env.MUTATION_MUTATE ?? '').split(/\s+/).filter(Boolean).length
for (const m of reportOnly ? [] : modules) {
  if (!ALL.includes(m)) throw new Error(`unknown module ${m}: one of ${ALL.join(', ')}`)
  const started = Date.now()
  const run = spawnSync('tools/mutation/node_modules/.bin/stryker', ['run', 'tools/mutation/stryker.config.mjs'], {
    stdio: 'inherit',
    env: { ...process.env, MODULE: m },
  })
  if (run.status !== 0) process.exit(run.status ?? 1)
  seconds[m] = Math.round((Date.now() - started) / 1000)
  ranAt[m] = true
}

const rows = []
const remaining = []
for (const m of ALL) {
  if (!existsSync(incremental(m))) {
    rows.push(previousRow[m] ?? `| ${m} | not run yet | | | | | | |`)
    remaining.push(...previousRemaining(m))
    continue
  }
  const { files } = JSON.parse(readFileSync(incremental(m), 'utf8'))
  const count = { Killed: 0, Timeout: 0, Survived: 0, NoCoverage: 0, CompileError: 0, RuntimeError: 0, Ignored: 0 }
  for (const [file, { source, mutants }] of Object.entries(files)) {
    const lines = source.split('\n')
    // A module's last run may predate edits that moved its lines: a reason is looked up at the line
    // that holds the same text in the file now (when exactly one does), else at the run's own line.
    const now = existsSync(file) ? readFileSync(file, 'utf8').split('\n') : []
    const lineNow = (line) => {
      const at = now.indexOf(lines[line - 1])
      return at !== -1 && now.lastIndexOf(lines[line - 1]) === at ? at + 1 : line
    }
    for (const mutant of mutants) {
      count[mutant.status] = (count[mutant.status] ?? 0) + 1
      if (mutant.status !== 'Survived' && mutant.status !== 'NoCoverage') continue
      const line = mutant.location.start.line
      const replacement = (mutant.replacement ?? '').replace(/\s+/g, ' ').slice(0, 60)
      const column = mutant.location.start.column
      const key = (at) => `${file}:${at}:${column} ${mutant.mutatorName} -> ${replacement}`
      const reason = accepted[key(lineNow(line))] ?? accepted[key(line)] ?? 'not reviewed'
      const original = lines[line - 1]?.trim().slice(0, 70) ?? ''
      remaining.push(
        `| ${m} | \`${file}:${line}:${column}\` | ${mutant.status} | ${mutant.mutatorName}: \`${replacement.replaceAll('|', '\\|')}\` in \`${original.replaceAll('|', '\\|')}\` | ${reason} |`,
      )
    }
  }
  const detected = count.Killed + count.Timeout
  const valid = detected + count.Survived + count.NoCoverage
  const score = valid === 0 ? 0 : (100 * detected) / valid
  rows.push(
    `| ${m} | ${score.toFixed(1)} % | ${count.Killed} | ${count.Timeout} | ${count.Survived} | ${count.NoCoverage} | ${count.CompileError + count.RuntimeError} | ${seconds[m] ?? '?'} s |`,
  )
}

const git = (...args) => execFileSync('git', args, { encoding: 'utf8' }).trim()
const dirty = git('status', '--porcelain', '--', 'src', 'test').length > 0 ? ' (with uncommitted changes)' : ''
const cpu = os.cpus()
writeFileSync(
  report,
  `# Mutation testing: results

Written by \`make mutation\` (tools/mutation/run.mjs); rewritten by each run. Not in CI (too slow for
2 cores). StrykerJS 10 with the tap runner, \`perTest\` coverage (a mutant runs only the test files
that reached it, in the module's order, until one fails). Incremental files
(tools/mutation/incremental/, a local cache the run writes, not committed) keep each module's full
results, but a run reuses none of them: the tests are the built .build/ files, which Stryker does not
read, so every test looks new. A module not run on this checkout keeps its row from this report.
\`MUTATION_MUTATE="file:line:column-line:column ..."\` retests only the mutants inside those ranges;
the module's others keep their earlier results from the cache (none on a fresh checkout).
Modules and their test files: tools/mutation/stryker.config.mjs. Score = (killed + timed out) /
(killed + timed out + survived + no coverage).

- date: ${new Date().toISOString()}
- machine: ${cpu.length} × ${cpu[0]?.model ?? 'unknown CPU'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node.js ${process.version}; shared with other work (load average at the end ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')})
- commit: ${git('rev-parse', '--short', 'HEAD')}${dirty}
- command: \`make mutation${chosen.length > 0 ? ` MUTATION_MODULES="${modules.join(' ')}"` : ''}\`${ranges > 0 ? ` with MUTATION_MUTATE (${ranges} ranges: only their mutants retested)` : ''} (this run: ${Object.keys(ranAt).join(', ') || 'report only'}; other rows from the modules' last runs)

| module | score | killed | timed out | survived | no coverage | errors | last run |
|---|---|---|---|---|---|---|---|
${rows.join('\n')}

## Mutants that remain

Each is equivalent (no test can tell it from the original) or accepted for the reason given;
reasons live in tools/mutation/accepted.json.

| module | where | status | mutant | why it remains |
|---|---|---|---|---|
${remaining.join('\n') || '| | | | none | |'}
`,
)
console.log(`wrote ${report}`)

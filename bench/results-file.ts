// Each benchmark's current results file: bench/<name>.md, rewritten by each full run, headed by
// when, on what machine, at which commit and by what command it was measured. History is git's.
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { projectRoot } from '../src/paths.js'

/** The commit measured, marked when the working tree differed from it. */
function commit(): string {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: projectRoot, encoding: 'utf8' }).trim()
  try {
    const head = git('rev-parse', '--short=12', 'HEAD')
    return git('status', '--porcelain', '--untracked-files=no') === '' ? head : `${head} with local changes`
  } catch {
    return 'unknown (not a git checkout)'
  }
}

/** The header lines: title, then date, machine, commit and the command that reproduces the run. */
export function resultsHeader(title: string, command: string): string[] {
  const cpus = os.cpus()
  return [
    `# ${title}`,
    '',
    `- date: ${new Date().toISOString()}`,
    `- machine: ${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.platform()} ${os.release()}, Node.js ${process.version}; load average at the end ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' / ')} (1/5/15 min)`,
    `- commit: ${commit()}`,
    `- reproduce: \`${command}\``,
    '',
  ]
}

/** Writes bench/<name>.md: the header, then the body. */
export function writeResults(name: string, title: string, command: string, body: string): string {
  const file = path.join(projectRoot, 'bench', `${name}.md`)
  writeFileSync(file, `${[...resultsHeader(title, command), body.trimEnd()].join('\n')}\n`)
  return file
}

// Every shell block of README.md and docs/*.md is either run by a test, in the place and order
// its document says, or marked `no-run` in its info string (```sh no-run) because it is for
// reading: a deployment's settings, a command that needs systemd, `make test` itself. Each
// runner named here selects its blocks by the marker its own file looks for.
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { projectRoot } from '../../src/paths.js'

const documents = [
  'README.md',
  ...readdirSync(path.join(projectRoot, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
]
const SHELLS = new Set(['sh', 'shell', 'bash', 'console'])

interface Block {
  doc: string
  info: string[]
  /** The text just before the block's fence (its marker comment, if any). */
  before: string
  text: string
  line: number
}

function shellBlocks(doc: string): Block[] {
  const markdown = readFileSync(path.join(projectRoot, doc), 'utf8')
  return [...markdown.matchAll(/^```([^\n]*)\n([\s\S]*?)^```$/gm)]
    .map((m) => ({
      doc,
      info: m[1]!.trim().split(/\s+/),
      before: markdown.slice(Math.max(0, m.index - 200), m.index),
      text: m[2]!,
      line: markdown.slice(0, m.index).split('\n').length,
    }))
    .filter((b) => SHELLS.has(b.info[0]!))
}

/** Who runs which blocks: the document, how its blocks are chosen, and the file that runs them. */
const RUNNERS: { doc: string; runner: string; marker: string; runs: (b: Block) => boolean }[] = [
  {
    doc: 'README.md',
    runner: 'test/readme/readme-walk.test.ts',
    marker: '^```sh\\n',
    runs: (b) => b.info.join(' ') === 'sh',
  },
  {
    doc: 'README.md',
    runner: 'test/contract/arazzo-workflows.test.ts',
    marker: '<!-- arazzo-workflows',
    runs: (b) => /<!-- arazzo-workflows[^>]*-->\s*$/.test(b.before),
  },
  {
    doc: 'docs/operations.md',
    runner: 'test/drills/failover.test.ts',
    marker: '<!-- failover-drill: ',
    runs: (b) => /<!-- failover-drill: \S+ -->\s*$/.test(b.before),
  },
  {
    doc: 'docs/integrators.md',
    runner: 'tools/sdk-check.ts',
    marker: '<!-- sdk-check',
    runs: (b) => /<!-- sdk-check[^>]*-->\s*$/.test(b.before),
  },
  {
    doc: 'docs/backup-and-restore.md',
    runner: 'test/drills/runbook.test.ts',
    marker: '<!-- runbook: ',
    runs: (b) => /<!-- runbook: \S+ -->\s*$/.test(b.before),
  },
  {
    doc: 'docs/partner-keys.md',
    runner: 'test/auth/key-registry.test.ts',
    marker: 'make key ',
    runs: (b) => /<!-- key-registry[^>]*-->\s*$/.test(b.before),
  },
]

t.test('every shell block is run by a test or marked no-run', async (t) => {
  const counts: string[] = []
  for (const doc of documents) {
    const blocks = shellBlocks(doc)
    if (blocks.length === 0) continue
    let run = 0
    let reading = 0
    for (const block of blocks) {
      const runners = RUNNERS.filter((r) => r.doc === doc && r.runs(block))
      const noRun = block.info.includes('no-run')
      t.ok(
        runners.length + (noRun ? 1 : 0) === 1,
        `${doc}:${block.line}: run by ${runners.map((r) => r.runner).join(', ') || 'nothing'}${noRun ? ', marked no-run' : ''}`,
      )
      if (noRun) reading++
      else run += runners.length
    }
    counts.push(`${doc}: ${run} run, ${reading} for reading`)
  }
  t.comment(counts.join('\n'))
  t.ok(counts.length >= 5, `${counts.length} documents with shell blocks`)
})

t.test('each runner looks for the marker its blocks carry', async (t) => {
  for (const { runner, marker, doc } of RUNNERS) {
    const source = readFileSync(path.join(projectRoot, runner), 'utf8')
    t.ok(source.includes(doc.replace(/^docs\//, '')) || source.includes(doc), `${runner} reads ${doc}`)
    t.ok(source.includes(marker.replaceAll('\\\\', '\\')), `${runner} selects by ${marker}`)
  }
})

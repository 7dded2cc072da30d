// The documents' links lead somewhere: every relative Markdown link and image in README.md and
// docs/*.md names a file of the repository (resolved from the document's own folder, as GitHub
// does), and its #fragment a heading there; every repository path a document quotes in
// backticks (`docs/…`, `test/…`, `deploy/…`, …) exists or is one git ignores (written locally); no section is there twice.
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { projectRoot } from '../../src/paths.js'

const documents = [
  'README.md',
  ...readdirSync(path.join(projectRoot, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
]
const TOP_FOLDERS = [
  'bench',
  'db',
  'deploy',
  'docs',
  'examples',
  'generated',
  'handlers',
  'spec',
  'src',
  'test',
  'tools',
  'web',
]

/** A path git ignores: one the tools write locally (a cache, an output), never in a clone. */
const gitIgnores = (candidate: string) =>
  spawnSync('git', ['-C', projectRoot, 'check-ignore', '-q', candidate]).status === 0

/** Text outside fenced code blocks: a block's text is code, not a link. */
const prose = (text: string) => text.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '')

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
const anchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, '')
    .replace(/[^\p{L}\p{N}\s-]/gu, '')
    .replace(/\s/g, '-')
const anchorsOf = (text: string) =>
  new Set(
    prose(text)
      .match(/^#{1,6} .*$/gm)
      ?.map((h) => anchor(h.replace(/^#+ /, ''))) ?? [],
  )

t.test('relative links and images resolve to files, and fragments to headings', async (t) => {
  let links = 0
  for (const doc of documents) {
    const text = readFileSync(path.join(projectRoot, doc), 'utf8')
    for (const [, target] of prose(text).matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      if (/^[a-z]+:/i.test(target!)) continue // http(s), mailto: not checked offline
      links++
      const [file, fragment] = target!.split('#') as [string, string | undefined]
      const resolved = file === '' ? doc : path.posix.join(path.posix.dirname(doc), file)
      t.ok(existsSync(path.join(projectRoot, resolved)), `${doc}: ${target} -> ${resolved} exists`)
      if (fragment && resolved.endsWith('.md') && existsSync(path.join(projectRoot, resolved)))
        t.ok(
          anchorsOf(readFileSync(path.join(projectRoot, resolved), 'utf8')).has(fragment),
          `${doc}: ${target}: a heading #${fragment} in ${resolved}`,
        )
      t.not(resolved, doc, `${doc}: ${target} does not lead to the document itself`)
    }
  }
  t.ok(links > 0, `${links} relative links checked`)
})

t.test('no document has two sections of one name', async (t) => {
  for (const doc of documents) {
    const headings = prose(readFileSync(path.join(projectRoot, doc), 'utf8')).match(/^#{1,6} .*$/gm) ?? []
    const names = headings.map((h) => anchor(h.replace(/^#+ /, '')))
    t.same(
      names.filter((name, i) => names.indexOf(name) !== i),
      [],
      `${doc}: ${names.length} headings, none twice`,
    )
  }
})

t.test('repository paths quoted in backticks exist', async (t) => {
  const missing: string[] = []
  let quoted = 0
  for (const doc of documents) {
    const text = readFileSync(path.join(projectRoot, doc), 'utf8')
    for (const [, quote] of prose(text).matchAll(/`([^`\s]+)`/g)) {
      const candidate = quote!.replace(/[:,.;]+$/, '')
      if (!TOP_FOLDERS.some((folder) => candidate.startsWith(`${folder}/`))) continue
      if (/[<>*{}$]|\.\.\./.test(candidate)) continue // a pattern or a placeholder, not a path
      quoted++
      if (!existsSync(path.join(projectRoot, candidate)) && !gitIgnores(candidate)) missing.push(`${doc}: \`${quote}\``)
    }
  }
  t.ok(quoted > 20, `${quoted} quoted paths checked`)
  t.same(missing, [], 'each exists')
})

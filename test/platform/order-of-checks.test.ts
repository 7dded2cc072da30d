// One text for the order of checks: the numbered list served in the API description
// (spec/openapi.yaml, "Order of checks", in /docs and /openapi.json) and the README's list are the
// same lines, and their stages are those of the comment in src/plugins/app/request-pipeline.ts,
// in the same order with the same first status. A new stage is a line in each of the three.
import t from 'tap'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { parse as parseYaml } from 'yaml'
import { projectRoot } from '../../src/paths.js'

const read = (file: string) => readFileSync(path.join(projectRoot, file), 'utf8')
const served = JSON.parse(read('generated/openapi.json')).info.description as string
const specDescription = parseYaml(read('spec/openapi.yaml')).info.description as string

/** The numbered items after `heading` until the first line that is not one. */
function numberedList(text: string, heading: string): string[] {
  const lines = text.split('\n')
  const at = lines.findIndex((l) => l.includes(heading))
  if (at < 0) return []
  const items: string[] = []
  for (const line of lines.slice(at + 1)) {
    if (line.trim() === '' && items.length === 0) continue
    if (!/^\d+\. /.test(line)) break
    items.push(line)
  }
  return items
}

/** (number, first HTTP status or null) of each stage. */
const stages = (items: string[]) =>
  items.map((item) => {
    const [, n, rest] = /^\s*(\d+)\.\s+(.*)$/.exec(item)!
    return [Number(n), /\b([1-5]\d\d)\b/.exec(rest!)?.[1] ?? null]
  })

t.test('the served order of checks is the README one, line for line', async (t) => {
  const fromSpec = numberedList(specDescription, '**Order of checks**')
  t.ok(fromSpec.length >= 10, `the spec lists the stages (${fromSpec.length})`)
  t.same(numberedList(served, '**Order of checks**'), fromSpec, 'served as written in the spec')
  const readme = read('README.md')
  t.same(numberedList(readme, '<!-- order-of-checks'), fromSpec, 'README.md has the same lines')
})

t.test("the listed stages are the request pipeline's, in its order", async (t) => {
  const source = read('src/plugins/app/request-pipeline.ts')
  const comment = source.slice(source.indexOf('/**'), source.indexOf('*/'))
  const fromCode = comment
    .split('\n')
    .map((l) => l.replace(/^\s*\*/, ''))
    .filter((l) => /^\s+\d+\.\s/.test(l))
  const listed = stages(numberedList(specDescription, '**Order of checks**'))
  t.ok(fromCode.length >= 10, `the pipeline comment numbers its stages (${fromCode.length})`)
  t.same(listed, stages(fromCode), 'same numbers, same first status')
})

// Every property test runs on a seed it names: a CI run tries the same inputs each time, so a
// fault is caught on every run or on none, never on some (each file reads an environment
// variable to try others). Read from the test files' syntax: each fast-check run (assert,
// check, sample) passes options with a `seed`.
import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import ts from 'typescript'
import { projectRoot } from '../../src/paths.js'

const RUNNERS = new Set(['assert', 'check', 'sample'])
const testDir = path.join(projectRoot, 'test')
const files = readdirSync(testDir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'))

/** Each fast-check run in a file: where it is and whether its options name a seed. */
function runsIn(file: string): { line: number; seeded: boolean }[] {
  const text = readFileSync(path.join(testDir, file), 'utf8')
  if (!text.includes('fast-check')) return []
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const runs: { line: number; seeded: boolean }[] = []
  const visit = (node: ts.Node) => {
    if (
      ts.isCallExpression(node) &&
      ts.isPropertyAccessExpression(node.expression) &&
      ts.isIdentifier(node.expression.expression) &&
      node.expression.expression.text === 'fc' &&
      RUNNERS.has(node.expression.name.text)
    ) {
      const options = node.arguments[1]
      const seeded =
        options !== undefined &&
        ts.isObjectLiteralExpression(options) &&
        options.properties.some((p) => p.name !== undefined && ts.isIdentifier(p.name) && p.name.text === 'seed')
      runs.push({ line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1, seeded })
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return runs
}

t.test('every fast-check run in the tests passes a seed', async (t) => {
  const runs = files.flatMap((file) => runsIn(file).map((run) => ({ ...run, where: `test/${file}:${run.line}` })))
  t.ok(runs.length >= 10, `${runs.length} runs found`)
  t.same(
    runs.filter((run) => !run.seeded).map((run) => run.where),
    [],
    'no run draws a seed of its own',
  )
})

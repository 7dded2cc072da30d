// The README's `sh` blocks, run in order by one bash against a fresh server, exactly as a
// newcomer pastes them: each call answers the status (and code) its `# expect` comment names.
import t from 'tap'
import { spawn, spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { operations } from '../../generated/operations.js'
import { projectRoot } from '../../src/paths.js'
import { createTestDatabase } from '../helpers/database.js'
import { startServer } from '../helpers/server-process.js'
import { childEnv, untracked } from '../helpers/child-env.js'

const readme = readFileSync(path.join(projectRoot, 'README.md'), 'utf8')

interface Expectation {
  status: number
  code?: string
  line: string
}
interface Block {
  text: string
  expectations: Expectation[]
}

/** The fenced blocks whose info string is exactly `sh`, in document order. */
function runnableBlocks(markdown: string): Block[] {
  return [...markdown.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => {
    const text = m[1]!
    const expectations = text.split('\n').flatMap((line) => {
      const e = /#\s*expect (\d{3})(?:\s+([A-Z]+_\d{3}))?/.exec(line)
      return e ? [{ status: Number(e[1]), code: e[2], line: line.trim() }] : []
    })
    return { text, expectations }
  })
}

/** Method and path of every `api METHOD PATH` call and every `curl ... "$BASE/PATH"` (a GET). */
function calledRoutes(blocks: Block[]): { method: string; path: string }[] {
  const commands = blocks.flatMap((b) => b.text.replace(/\\\n/g, ' ').split('\n'))
  return commands.flatMap((command) => {
    const api = /^api (\w+) ["']?([^"'\s?]+)/.exec(command)
    if (api) return [{ method: api[1]!, path: api[2]! }]
    const curl = /^curl .*"\$BASE(\/[^"?]*)"/.exec(command)
    return curl ? [{ method: 'GET', path: curl[1]! }] : []
  })
}

function run(script: string, env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const bash = spawn(...untracked('bash', ['--noprofile', '--norc'], env), {
      cwd: projectRoot,
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    bash.stdout.on('data', (d) => (stdout += d))
    bash.stderr.on('data', (d) => (stderr += d))
    bash.on('error', reject)
    bash.on('close', (code) => resolve({ code, stdout, stderr }))
    bash.stdin.end(script)
  })
}

const END = '@@@ end of README block'

t.test('the README walk runs top to bottom on a fresh instance', async (t) => {
  const blocks = runnableBlocks(readme)
  const calls = blocks.reduce((n, b) => n + b.expectations.length, 0)
  t.ok(blocks.length >= 6, `${blocks.length} runnable blocks`)
  t.ok(calls >= 20, `${calls} calls with an expected status`)
  const called = calledRoutes(blocks)
  for (const [id, op] of Object.entries(operations)) {
    const template = new RegExp(`^${op.path.replace(/\{\w+\}/g, '[^/]+')}$`)
    t.ok(
      called.some((c) => c.method === op.method && template.test(c.path)),
      `the walk calls ${id} (${op.method} ${op.path})`,
    )
  }

  const db = await createTestDatabase(t)
  // No API_KEYS: the development key the README uses by default.
  const server = await startServer(t, { DATABASE_URL: db.url, API_KEYS: '', APP_ENV: 'dev' })
  const { API_KEY: _unset, ...env } = childEnv()
  const script = blocks.map((b, i) => `${b.text}\necho "${END} ${i}"\n`).join('')
  const result = await run(script, { ...env, BASE: server.base })
  t.equal(result.code, 0, 'bash exits 0')
  t.equal(result.stderr, '', 'nothing on stderr (no command failed)')

  const outputs = result.stdout.split(new RegExp(`^${END} \\d+$`, 'm'))
  t.equal(outputs.length, blocks.length + 1, 'every block ran to its end')
  blocks.forEach((block, i) => {
    // Each answer is its body followed by its "HTTP <status>" line.
    const answers = [...(outputs[i] ?? '').matchAll(/([\s\S]*?)^HTTP (\d{3})$/gm)].map((m) => ({
      body: m[1]!,
      status: Number(m[2]),
    }))
    t.equal(answers.length, block.expectations.length, `block ${i + 1}: one answer per call marked "# expect"`)
    block.expectations.forEach((expected, j) => {
      const answer = answers[j]
      t.equal(answer?.status, expected.status, expected.line)
      if (expected.code) t.match(answer?.body, `"code":"${expected.code}"`, `${expected.code}: ${expected.line}`)
    })
  })
  t.match(result.stdout, /^study_service_build_info\{/m, 'the metrics example shows build info')
})

t.test('nothing in the repository names a document that is not in it', async (t) => {
  const outside = ['decisions', 'stack-notes', 'study-service-api'].map((name) => `${name}.md`)
  const grep = spawnSync(
    'git',
    ['grep', '-n', '-I', ...outside.flatMap((n) => ['-e', n]), '--', '.', ':!test/readme/readme-walk.test.ts'],
    {
      cwd: projectRoot,
      encoding: 'utf8',
    },
  )
  t.equal(grep.stdout, '', 'no mention')
  t.equal(grep.status, 1, 'git grep found nothing')
})

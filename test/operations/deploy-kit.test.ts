// The operator kit in deploy/: the alert rules pass `promtool test rules`, every rule is needed
// by those tests, the dashboard's queries parse, and every metric either names exists on the
// app's real /metrics output.
import t, { type Test } from 'tap'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { parse, stringify } from 'yaml'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { projectRoot } from '../../src/paths.js'
import { createTestDatabase } from '../helpers/database.js'

const RULES = path.join(projectRoot, 'deploy/prometheus/alerts.yml')
const RULE_TESTS = path.join(projectRoot, 'deploy/prometheus/alerts.test.yml')
const DASHBOARD = path.join(projectRoot, 'deploy/grafana/study-service.json')

/** Series Prometheus makes itself, not the app. */
const FROM_PROMETHEUS = new Set(['up'])
/** Series prometheus-postgres-exporter makes from deploy/'s queries: <query>_<column>, labels aside. */
const exporterQueries = parse(
  readFileSync(path.join(projectRoot, 'deploy/prometheus/postgres-exporter-queries.yaml'), 'utf8'),
) as Record<string, { metrics: Record<string, { usage: string }>[] }>
const FROM_POSTGRES_EXPORTER = new Set(
  Object.entries(exporterQueries).flatMap(([query, { metrics }]) =>
    metrics.flatMap((m) =>
      Object.entries(m)
        .filter(([, { usage }]) => usage !== 'LABEL')
        .map(([column]) => `${query}_${column}`),
    ),
  ),
)

interface Rule {
  alert: string
  expr: string
}
const rulesFile = parse(readFileSync(RULES, 'utf8')) as { groups: { name: string; rules: Rule[] }[] }
const rules = rulesFile.groups.flatMap((g) => g.rules)
const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
  panels: { title: string; targets?: { expr: string }[] }[]
}
/** Dashboard queries with Grafana's variables replaced by what Prometheus accepts. */
const dashboardExprs = dashboard.panels.flatMap((p) =>
  (p.targets ?? []).map((target) => ({
    panel: p.title,
    expr: target.expr.replaceAll('$__rate_interval', '5m').replaceAll('$job', '.*').replaceAll('$instance', '.*'),
  })),
)

function promtool(...args: string[]) {
  const run = spawnSync('promtool', args, { encoding: 'utf8' })
  if (run.error)
    throw new Error(
      `promtool is not installed (Debian package prometheus; make test installs it, tools/install-test-deps.sh): ${run.error.message}`,
    )
  return { status: run.status, output: `${run.stdout}${run.stderr}` }
}

function workDir(t: Test) {
  const dir = mkdtempSync(path.join(tmpdir(), 'alerts-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

const PROMQL_WORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'inf',
  'nan',
])

/** Metric names in a PromQL expression: identifiers that are not functions, keywords, labels or strings. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // strings
    .replace(/\{[^}]*\}/g, '') // label matchers
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '') // label lists
    .replace(/\[[^\]]*\]/g, '') // ranges
  return [...bare.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)]
    .filter((m) => !m[2] && !PROMQL_WORDS.has(m[1]!.toLowerCase()))
    .map((m) => m[1]!)
}

t.test('promtool: the rules are valid and their unit tests pass', async (t) => {
  const check = promtool('check', 'rules', RULES)
  t.equal(check.status, 0, check.output)
  const test = promtool('test', 'rules', RULE_TESTS)
  t.equal(test.status, 0, test.output)
})

t.test('every rule is needed by the unit tests: without it, or with a wrong threshold, they fail', async (t) => {
  t.ok(rules.length >= 8, `${rules.length} rules`)
  const ruleTests = parse(readFileSync(RULE_TESTS, 'utf8')) as {
    tests: { name: string; alert_rule_test?: { alertname: string }[]; promql_expr_test?: unknown[] }[]
  }
  /**
   * The unit tests against `mutated` rules. Only the test groups that can see the change run: those
   * that name `alert` (an alert test judges only the alert it names) and any PromQL test; the
   * full file is the previous test's.
   */
  const run = (mutated: typeof rulesFile, alert: string) => {
    const dir = workDir(t)
    writeFileSync(path.join(dir, 'alerts.yml'), stringify(mutated))
    const tests = ruleTests.tests.filter(
      (g) => g.promql_expr_test !== undefined || g.alert_rule_test?.some((a) => a.alertname === alert),
    )
    writeFileSync(path.join(dir, 'alerts.test.yml'), stringify({ ...ruleTests, tests }))
    return promtool('test', 'rules', path.join(dir, 'alerts.test.yml'))
  }
  for (const rule of rules) {
    const without = { groups: rulesFile.groups.map((g) => ({ ...g, rules: g.rules.filter((r) => r !== rule) })) }
    t.not(run(without, rule.alert).status, 0, `removing ${rule.alert} fails the tests`)
  }
  const looser = {
    groups: rulesFile.groups.map((g) => ({
      ...g,
      rules: g.rules.map((r) =>
        r.alert === 'StudyServiceHigh5xxRatio' ? { ...r, expr: r.expr.replace('> 0.05', '> 0.5') } : r,
      ),
    })),
  }
  t.not(run(looser, 'StudyServiceHigh5xxRatio').status, 0, 'a 5xx threshold of 50% instead of 5% fails the tests')
})

t.test('the dashboard: RED per route, database, saturation; every query parses', async (t) => {
  const titles = dashboard.panels.map((p) => p.title).join(' | ')
  for (const wanted of [
    /Requests\/s by route/,
    /5xx ratio by route/,
    /Duration p99 by route/,
    /DB operation p99/,
    /Pool/,
    /Event loop lag/,
    /Memory/,
  ]) {
    t.match(titles, wanted)
  }
  // promtool parses PromQL only inside rule files: each query becomes a recording rule.
  const dir = workDir(t)
  const file = path.join(dir, 'dashboard-queries.yml')
  writeFileSync(
    file,
    stringify({
      groups: [
        { name: 'dashboard', rules: dashboardExprs.map((q, i) => ({ record: `dashboard:query:${i}`, expr: q.expr })) },
      ],
    }),
  )
  const check = promtool('check', 'rules', file)
  t.equal(check.status, 0, check.output)
})

t.test('every metric the rules and the dashboard name is on the real /metrics', async (t) => {
  t.same(metricNames('sum by (job) (rate(a_total{x="b(c)"}[5m])) / on(job) histogram_quantile(0.9, b_bucket) > 0.5'), [
    'a_total',
    'b_bucket',
  ])
  const db = await createTestDatabase(t)
  const app = await buildApp({ config: loadConfig({ API_KEYS: 'k', LOG_LEVEL: 'silent' }), sql: db.sql, logger: false })
  t.teardown(() => app.close())
  const text = (await app.inject({ method: 'GET', url: '/metrics' })).body
  const types = new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]))
  const exposed = (name: string) => {
    if (types.has(name)) return true
    const base = name.replace(/_(bucket|sum|count)$/, '')
    return base !== name && ['histogram', 'summary'].includes(types.get(base) ?? '')
  }
  t.same([...FROM_POSTGRES_EXPORTER].sort(), [
    'pg_archiver_archived_count',
    'pg_archiver_failed_count',
    'pg_archiver_last_archived_timestamp_seconds',
    'pg_archiver_last_failed_timestamp_seconds',
    'pgbackrest_backup_last_stop_timestamp_seconds',
  ])
  const named = [
    ...rules.map((r) => ({ where: `alert ${r.alert}`, expr: r.expr })),
    ...dashboardExprs.map((q) => ({ where: `panel ${q.panel}`, expr: q.expr })),
  ]
  const seen = new Set<string>()
  for (const { where, expr } of named) {
    for (const name of metricNames(expr)) {
      seen.add(name)
      if (FROM_PROMETHEUS.has(name)) continue
      // Patroni's own /metrics (the database tier's rules): the failover drill checks those names.
      if (name.startsWith('patroni_')) continue
      if (where.startsWith('alert ') && FROM_POSTGRES_EXPORTER.has(name)) {
        t.pass(`${where}: ${name} comes from the exporter's queries`)
        continue
      }
      t.ok(exposed(name), `${where}: ${name} is on /metrics`)
    }
  }
  t.ok(seen.size >= 15, `${seen.size} metric names checked`)
})

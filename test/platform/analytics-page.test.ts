// The docs team's page at /analytics, driven in a real headless Chromium (Debian's `chromium`,
// through puppeteer-core) against a running service with a seeded week: it asks for a key, keeps
// it for the tab only, and shows the numbers of the fixture. ANALYTICS_SCREENSHOT=<file.png>
// also saves what the page shows (docs/images/analytics.png in the README).
import { existsSync } from 'node:fs'
import t from 'tap'
import puppeteer from 'puppeteer-core'
import { createTestDatabase } from '../helpers/database.js'
import { startServer } from '../helpers/server-process.js'
import { waitFor } from '../helpers/wait.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: tools/install-test-deps.sh installs it`)

const DAY = 86_400_000
const db = await createTestDatabase(t)
// The analytics answer from a rollup refreshed in the background: every half second here.
const server = await startServer(t, {
  DATABASE_URL: db.url,
  API_KEYS: 'page-key',
  ANALYTICS_REFRESH_INTERVAL_MS: '500',
})

// A week of searches: "install" every day by several sessions with a click, "sso setup" every
// other day by two sessions with no result, and one visitor's own search that must not be shown.
const today = Math.floor(Date.now() / DAY) * DAY
const events: Record<string, unknown>[] = []
let n = 0
const search = (dayMs: number, text: string, session: string, results: number, clickRank = 0) => {
  const id = `q${++n}`
  const at = dayMs + 3_600_000 + n * 1000
  events.push({
    event: 'search_query',
    emitted_at_ms: at,
    query_id: id,
    session_id: session,
    query_text: text,
    results_count: results,
  })
  if (clickRank > 0)
    events.push({ event: 'search_result_click', emitted_at_ms: at + 2000, query_id: id, result_rank: clickRank })
}
for (let d = 0; d < 7; d++) {
  const dayMs = today - d * DAY
  for (let s = 0; s < 2 + (d % 3); s++)
    search(dayMs, s === 0 ? 'Install' : ' install ', `s${s}`, 5, s === 0 ? 1 + (d % 3) : 0)
  if (d % 2 === 0) for (const s of ['s1', 's2']) search(dayMs, 'SSO  setup', s, 0)
}
search(today, 'jane@example.com', 'visitor', 0)
// Searches sent with spaces for text, by two sessions: listed under an empty query.
for (const s of ['s1', 's2']) search(today, '   ', s, 3)
const searches = events.filter((e) => e.event === 'search_query')
const clicks = events.filter((e) => e.event === 'search_result_click')
const res = await fetch(`${server.base}/api/v1/telemetry/docs-search/batch`, {
  method: 'POST',
  headers: { 'content-type': 'application/json', 'x-api-key': 'page-key' },
  body: JSON.stringify({ events }),
})
t.equal(res.status, 202, 'the fixture is stored')

// One parent test: tap waits on it while the browser runs (its handles keep no event loop alive).
t.test('the analytics page in headless Chromium', async (t) => {
  // The rollup holds the fixture once a refresh has run after it: the series counts every search.
  await waitFor('the fixture in the analytics', async () => {
    const series = await fetch(`${server.base}/api/v1/telemetry/docs-search/analytics/series?granularity=day`, {
      headers: { 'x-api-key': 'page-key' },
    })
    const points = ((await series.json()) as { points: { total_queries: number }[] }).points
    return points.reduce((sum, p) => sum + p.total_queries, 0) === searches.length
  })
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--headless=new', '--disable-gpu', '--disable-dev-shm-usage'],
  })
  t.teardown(() => browser.close())
  t.ok(browser.connected, 'chromium runs')

  t.test('the page shows the fixture: totals, charts and tables; the key stays in the tab', async (t) => {
    const page = await browser.newPage()
    await page.setViewport({ width: 1200, height: 1100 })
    const problems: string[] = []
    page.on('console', (m) => m.type() === 'error' && problems.push(m.text()))
    page.on('pageerror', (e) => problems.push(String(e)))
    page.on('requestfailed', (r) => problems.push(`failed: ${r.url()}`))
    const requested: string[] = []
    page.on('request', (r) => requested.push(r.url()))

    const answer = await page.goto(`${server.base}/analytics`)
    t.equal(answer?.status(), 200)
    t.match(answer?.headers()['content-security-policy'], "script-src 'self'")
    await page.type('#key', 'page-key')
    await page.click('button[type=submit]')
    await page.waitForSelector('#results:not([hidden])')

    const text = (selector: string) => page.$eval(selector, (e) => e.textContent)
    const rows = (table: string) =>
      page.$$eval(`#${table} tbody tr`, (trs) =>
        trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)),
      )
    const zero = searches.filter((s) => s.results_count === 0).length
    t.equal(await text('#total-queries'), String(searches.length), 'every search counts, the unlisted one too')
    t.equal(await text('#zero-result-rate'), `${((zero / searches.length) * 100).toFixed(1)} %`)
    t.equal(await text('#query-ctr'), `${((clicks.length / searches.length) * 100).toFixed(1)} %`)

    const install = searches.filter((s) => String(s.query_text).trim().toLowerCase() === 'install').length
    const sso = searches.filter((s) => s.query_text === 'SSO  setup').length
    const top = await rows('top-searches')
    t.same(
      top.map((r) => r.slice(0, 4)),
      [
        ['install', String(install), '0', String(clicks.length)],
        ['sso setup', String(sso), String(sso), '0'],
        ['(no text)', '2', '0', '0'],
      ],
      'normalised queries, a search without text labelled; the one-visitor search is not listed',
    )
    t.same(await rows('no-results'), [['sso setup', String(sso)]])
    t.same(await rows('no-clicks'), [
      ['install', String(install - clicks.length)],
      ['(no text)', '2'],
    ])
    t.equal(await page.$eval('#empty', (e) => (e as HTMLElement).hidden), true, 'no empty-state note with data')
    const positions = await rows('positions')
    t.equal(positions.length, 12)
    for (const rank of [1, 2, 3])
      t.same(positions[rank - 1], [String(rank), String(clicks.filter((c) => c.result_rank === rank).length)])
    t.same(positions[11], ['21+', '0'])
    t.equal(await page.$$eval('.uplot canvas', (c) => c.length), 2, 'two charts drawn')

    t.same(problems, [], 'no console error, no blocked or failed request')
    t.ok(
      requested.every((url) => url.startsWith(server.base) || url.startsWith('data:')),
      'nothing from another origin',
    )
    t.equal(
      await page.evaluate(() => sessionStorage.getItem('docs-search-analytics-key')),
      'page-key',
      'kept for the tab',
    )
    t.equal(await page.evaluate(() => localStorage.length), 0, 'nothing kept beyond it')
    if (process.env.ANALYTICS_SCREENSHOT)
      await page.screenshot({ path: process.env.ANALYTICS_SCREENSHOT, fullPage: true })

    const other = await browser.createBrowserContext()
    const fresh = await other.newPage()
    await fresh.goto(`${server.base}/analytics`)
    t.equal(await fresh.$eval('#key', (e) => (e as HTMLInputElement).value), '', 'another tab asks again')
    await other.close()
  })

  t.test('days with no search yet: the page says what to do, and each list says none', async (t) => {
    const page = await browser.newPage()
    await page.goto(`${server.base}/analytics`)
    await page.type('#key', 'page-key')
    await page.$eval('#from', (e) => ((e as HTMLInputElement).value = '2020-01-01'))
    await page.$eval('#to', (e) => ((e as HTMLInputElement).value = '2020-01-07'))
    await page.click('button[type=submit]')
    await page.waitForSelector('#results:not([hidden])')
    t.equal(await page.$eval('#empty', (e) => (e as HTMLElement).hidden), false, 'the empty-state note shows')
    t.match(await page.$eval('#empty', (e) => e.textContent), /No searches in these days yet[\s\S]*telemetry:ingest/)
    for (const table of ['top-searches', 'no-results', 'no-clicks'])
      t.same(
        await page.$$eval(`#${table} tbody td`, (tds) => tds.map((td) => td.textContent)),
        ['None in these days.'],
        `${table}: none`,
      )
    t.equal(await page.$eval('#total-queries', (e) => e.textContent), '0')
  })

  t.test('a key without telemetry:read or a bad key: the page says so and shows no data', async (t) => {
    const page = await browser.newPage()
    await page.goto(`${server.base}/analytics`)
    await page.type('#key', 'wrong-key')
    await page.click('button[type=submit]')
    await page.waitForFunction(() => document.getElementById('status')?.textContent?.startsWith('401'))
    t.equal(await page.$eval('#results', (e) => (e as HTMLElement).hidden), true)
  })
})

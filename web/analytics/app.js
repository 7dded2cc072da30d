// The docs team's analytics page: asks for an API key with telemetry:read (kept in
// sessionStorage, so only for this tab), reads the five analytics operations for the chosen
// range and shows the series as charts (uPlot) and the lists as tables.
;(() => {
  const KEY = 'docs-search-analytics-key'
  const BASE = '/api/v1/telemetry/docs-search/analytics'
  const $ = (id) => document.getElementById(id)
  const percent = (rate) => (rate === null ? '–' : `${(rate * 100).toFixed(1)} %`)
  const number = (n) => (n === null ? '–' : String(Math.round(n * 100) / 100))
  const day = (ms) => new Date(ms).toISOString().slice(0, 10)
  const charts = []

  const today = Date.now()
  $('to').value = day(today)
  $('from').value = day(today - 6 * 86_400_000)
  $('key').value = sessionStorage.getItem(KEY) ?? ''

  async function read(path, query) {
    const res = await fetch(`${BASE}${path}?${new URLSearchParams(query)}`, { headers: { 'x-api-key': $('key').value } })
    const body = await res.json().catch(() => null)
    if (!res.ok) {
      const first = body?.errors?.[0] ?? body
      throw new Error(`${res.status} ${first?.code ?? ''}: ${first?.message ?? 'request failed'}`)
    }
    return body
  }

  // A search sent without text (or only spaces) is listed under an empty query.
  const queryLabel = (query) => (query === '' ? '(no text)' : query)

  function fill(table, rows) {
    const body = $(table).querySelector('tbody')
    if (rows.length === 0) {
      const td = document.createElement('td')
      td.colSpan = $(table).querySelectorAll('thead th').length
      td.className = 'none'
      td.textContent = 'None in these days.'
      const tr = document.createElement('tr')
      tr.append(td)
      body.replaceChildren(tr)
      return
    }
    body.replaceChildren(
      ...rows.map((cells) => {
        const tr = document.createElement('tr')
        for (const cell of cells) {
          const td = document.createElement('td')
          td.textContent = cell
          tr.append(td)
        }
        return tr
      }),
    )
  }

  function chart(target, points, series) {
    const x = points.map((p) => Date.parse(p.start) / 1000)
    const data = [x, ...series.map((s) => points.map((p) => p[s.key]))]
    const opts = {
      width: 520,
      height: 240,
      series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, spanGaps: false }))],
      axes: [{}, { values: series[0].axis }],
    }
    const plot = new uPlot(opts, data, $(target))
    charts.push(plot)
  }

  async function show() {
    const query = { from: $('from').value, to: $('to').value }
    const lists = { ...query, limit: '20' }
    $('status').textContent = 'Loading…'
    const [series, top, noResults, noClicks, positions] = await Promise.all([
      read('/series', { ...query, granularity: $('granularity').value }),
      read('/searches', lists),
      read('/searches/no-results', lists),
      read('/searches/no-clicks', lists),
      read('/clicks/positions', query),
    ])
    const total = series.points.reduce((n, p) => n + p.total_queries, 0)
    const zero = series.points.reduce((n, p) => n + p.zero_result_queries, 0)
    const clicked = series.points.reduce((n, p) => n + p.queries_with_click, 0)
    $('total-queries').textContent = String(total)
    $('zero-result-rate').textContent = percent(total === 0 ? null : zero / total)
    $('query-ctr').textContent = percent(total === 0 ? null : clicked / total)
    $('empty').hidden = total > 0
    for (const plot of charts.splice(0)) plot.destroy()
    chart('volume-chart', series.points, [
      { key: 'total_queries', label: 'searches', color: '#2f6fde' },
      { key: 'zero_result_queries', label: 'no result', color: '#d4452b' },
      { key: 'queries_with_click', label: 'with click', color: '#2b9d5c' },
    ])
    chart('rate-chart', series.points, [
      { key: 'query_ctr', label: 'CTR', color: '#2b9d5c', axis: (_u, ticks) => ticks.map((t) => `${Math.round(t * 100)} %`) },
      { key: 'zero_result_rate', label: 'no-result rate', color: '#d4452b' },
    ])
    fill(
      'top-searches',
      top.items.map((i) => [queryLabel(i.query), i.count, i.no_result_count, i.with_click_count, percent(i.click_through_rate), number(i.average_click_position)]),
    )
    fill('no-results', noResults.items.map((i) => [queryLabel(i.query), i.count]))
    fill('no-clicks', noClicks.items.map((i) => [queryLabel(i.query), i.count]))
    fill('positions', positions.positions.map((p) => [p.to_rank === null ? `${p.from_rank}+` : p.from_rank === p.to_rank ? p.from_rank : `${p.from_rank}–${p.to_rank}`, p.clicks]))
    $('results').hidden = false
    $('status').textContent = ''
  }

  $('range').addEventListener('submit', (event) => {
    event.preventDefault()
    sessionStorage.setItem(KEY, $('key').value)
    show().catch((err) => {
      $('results').hidden = true
      $('status').textContent = err.message
    })
  })
  $('forget').addEventListener('click', () => {
    sessionStorage.removeItem(KEY)
    $('key').value = ''
  })
})()

// What the analytics privacy threshold (TELEMETRY_MIN_SESSIONS) does and does not do, through
// the public ingest key as a web page holds it (docs/docs-search-analytics.md says the same):
// one visitor's search is counted but its text never listed, however often that visitor
// repeats it; it does not stop a holder of the ingest key from adding a session of its own,
// which lists a text it guessed. Session ids are the client's word: the threshold guards
// against showing a text by accident, not against someone confirming a guess.
import t from 'tap'
import { writeKeyFile } from '../helpers/keys.js'
import { buildTestApp } from '../helpers/app.js'
import { refreshAnalyticsRollup, SLICES_PER_REFRESH } from '../../src/repositories/telemetry-analytics-rollup.js'

const file = await writeKeyFile(t, [
  { id: 'docs-page', secret: 'ssk_docs_page', scopes: ['telemetry:ingest'] },
  { id: 'docs-team', secret: 'ssk_docs_team', scopes: ['telemetry:read'] },
])
const api = await buildTestApp(t, { API_KEYS_FILE: file, TELEMETRY_MIN_SESSIONS: '2' })
const SEARCH = 'jane.doe@example.com hiv test'

const ingest = async (session_id: string, query_text: string) => {
  const res = await api.request({
    method: 'POST',
    url: '/api/v1/telemetry/docs-search',
    key: 'ssk_docs_page',
    payload: { event: 'search_query', emitted_at_ms: Date.now(), session_id, query_text, results_count: 0 },
  })
  t.equal(res.statusCode, 202)
}
const listed = async () => {
  while ((await refreshAnalyticsRollup(api.db.sql)).logged >= SLICES_PER_REFRESH);
  const res = await api.request({
    method: 'GET',
    url: '/api/v1/telemetry/docs-search/analytics/searches?limit=100',
    key: 'ssk_docs_team',
  })
  t.equal(res.statusCode, 200)
  return (JSON.parse(res.body).items as { query: string; count: number }[])
    .filter((i) => i.query === SEARCH)
    .map(({ query, count }) => ({ query, count }))
}

t.test("one visitor's search is counted, never listed", async (t) => {
  await ingest('victim-session', SEARCH)
  await ingest('victim-session', SEARCH)
  t.same(await listed(), [], 'one session, asked twice: not listed')
})

t.test('a second session from the ingest key lists it: the threshold is no defence against a guess', async (t) => {
  await ingest('forged-session', '  JANE.DOE@example.com   HIV test ')
  t.same(await listed(), [{ query: SEARCH, count: 3 }], 'listed with every search counted, as documented')
})

// getDocsSearchTopSearches, getDocsSearchNoResultSearches, getDocsSearchNoClickSearches,
// getDocsSearchClickPositions, getDocsSearchSeries: the docs-search analytics of a range of UTC days.
import type { AnalyticsRange } from '../src/repositories/telemetry-analytics.js'
import { invalidQueryParameter } from '../src/validation/request-validation-error.js'
import type { HandlerDeps, ServiceHandlers } from './types.js'

type AnalyticsOperations =
  | 'getDocsSearchTopSearches'
  | 'getDocsSearchNoResultSearches'
  | 'getDocsSearchNoClickSearches'
  | 'getDocsSearchClickPositions'
  | 'getDocsSearchSeries'

const DAY_MS = 86_400_000
const HOUR_MS = 3_600_000
const MAX_DAYS = 90
const MAX_HOURLY_DAYS = 7
const DEFAULT_DAYS = 7
const DEFAULT_LIMIT = 10

export interface DayRange extends AnalyticsRange {
  from: string
  to: string
  days: number
}

const day = (ms: number) => new Date(ms).toISOString().slice(0, 10)

/**
 * The days `from` to `to` (both included, UTC; the schema checked the format) as [fromMs, toMs);
 * today and the 6 days before it when omitted. A 422 when `from` is after `to` or the range is
 * longer than maxDays.
 */
export function dayRange(query: { from?: string; to?: string }, now: Date, maxDays = MAX_DAYS): DayRange {
  const toStart =
    query.to === undefined ? Math.floor(now.getTime() / DAY_MS) * DAY_MS : Date.parse(`${query.to}T00:00:00Z`)
  const fromMs =
    query.from === undefined ? toStart - (DEFAULT_DAYS - 1) * DAY_MS : Date.parse(`${query.from}T00:00:00Z`)
  const toMs = toStart + DAY_MS
  const days = (toMs - fromMs) / DAY_MS
  if (days < 1) throw invalidQueryParameter('from', query.from ?? day(fromMs), 'must not be after to')
  if (days > maxDays)
    throw invalidQueryParameter('from', query.from ?? day(fromMs), `must be at most ${maxDays} days before to`)
  return { from: day(fromMs), to: day(toStart), fromMs, toMs, days }
}

export function createTelemetryAnalyticsHandlers({
  config,
  db,
  now,
}: HandlerDeps): ServiceHandlers<AnalyticsOperations> {
  const minSessions = config.telemetryMinSessions
  return {
    async getDocsSearchTopSearches(request) {
      const range = dayRange(request.query, now())
      const items = await db.repos.telemetryAnalytics.searches(range, minSessions, request.query.limit ?? DEFAULT_LIMIT)
      return { from: range.from, to: range.to, items }
    },

    async getDocsSearchNoResultSearches(request) {
      const range = dayRange(request.query, now())
      const items = await db.repos.telemetryAnalytics.noResults(
        range,
        minSessions,
        request.query.limit ?? DEFAULT_LIMIT,
      )
      return { from: range.from, to: range.to, items }
    },

    async getDocsSearchNoClickSearches(request) {
      const range = dayRange(request.query, now())
      const items = await db.repos.telemetryAnalytics.noClicks(range, minSessions, request.query.limit ?? DEFAULT_LIMIT)
      return { from: range.from, to: range.to, items }
    },

    async getDocsSearchClickPositions(request) {
      const range = dayRange(request.query, now())
      return { from: range.from, to: range.to, positions: await db.repos.telemetryAnalytics.clickPositions(range) }
    },

    async getDocsSearchSeries(request) {
      const granularity = request.query.granularity ?? 'day'
      const range = dayRange(request.query, now(), granularity === 'hour' ? MAX_HOURLY_DAYS : MAX_DAYS)
      const points = await db.repos.telemetryAnalytics.series(range, granularity === 'hour' ? HOUR_MS : DAY_MS)
      return { from: range.from, to: range.to, granularity, points }
    },
  }
}

// Builds the real app on a fresh database and wraps `inject` so that every response is
// checked against the contract (test/helpers/contract.ts).
import type { Test } from 'tap'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { createTestDatabase, type TestDatabase } from './database.js'
import { contractProblems } from './contract.js'

export const API_KEY = 'test-key-1'

/**
 * Load shedding off: on a busy CI machine the event loop can lag past the threshold, and tests
 * that use this are about behaviour, not about overload (test/platform/load-shedding.test.ts is).
 */
export const NO_LOAD_SHEDDING = { LOAD_SHED_MAX_EVENT_LOOP_DELAY_MS: '0' } as const

export interface TestApi {
  app: FastifyInstance
  db: TestDatabase
  /** inject with the API key and JSON content type; fails the test on a contract violation */
  request(options: InjectOptions & { key?: string | null }): Promise<LightMyRequestResponse>
  get(url: string, headers?: Record<string, string>): Promise<LightMyRequestResponse>
  post(
    url: string,
    payload: unknown,
    idempotencyKey?: string | null,
    headers?: Record<string, string>,
  ): Promise<LightMyRequestResponse>
  put(url: string, payload: unknown, idempotencyKey?: string | null): Promise<LightMyRequestResponse>
  patch(url: string, payload: unknown, idempotencyKey?: string | null): Promise<LightMyRequestResponse>
}

let keyCounter = 0
/** A fresh Idempotency-Key. */
export const newKey = () => `key-${process.pid}-${Date.now()}-${++keyCounter}`

export async function buildTestApp(
  t: Test,
  env: Record<string, string> = {},
  options: { now?: () => Date; rateLimitClock?: () => number } = {},
): Promise<TestApi> {
  const db = await createTestDatabase(t)
  const config = loadConfig({
    API_KEYS: `${API_KEY},test-key-2`,
    APP_ENV: 'dev',
    DATABASE_URL: db.url,
    LOG_LEVEL: 'silent',
    RATE_LIMIT_MAX: '100000',
    ...NO_LOAD_SHEDDING,
    ...env,
  })
  const app = await buildApp({ config, sql: db.sql, logger: false, ...options })
  t.teardown(() => app.close())

  const request: TestApi['request'] = async ({ key = API_KEY, ...options }) => {
    const headers: Record<string, string> = { ...(options.headers as Record<string, string>) }
    if (key !== null) headers['x-api-key'] ??= key
    if (options.payload !== undefined && typeof options.payload !== 'string' && !Buffer.isBuffer(options.payload)) {
      headers['content-type'] ??= 'application/json'
    }
    const res = await app.inject({ ...options, headers })
    const problems = contractProblems(
      String(options.method),
      String(options.url),
      res.statusCode,
      res.headers,
      res.body,
    )
    if (problems.length > 0)
      throw new Error(`contract violation:\n${problems.join('\n')}\nbody: ${res.body.slice(0, 500)}`)
    return res
  }
  const write =
    (method: 'POST' | 'PUT' | 'PATCH') =>
    (url: string, payload: unknown, idempotencyKey: string | null = newKey(), extra: Record<string, string> = {}) =>
      request({
        method,
        url,
        payload: payload as InjectOptions['payload'],
        headers: { ...(idempotencyKey === null ? {} : { 'idempotency-key': idempotencyKey }), ...extra },
      })
  return {
    app,
    db,
    request,
    get: (url, headers = {}) => request({ method: 'GET', url, headers }),
    post: write('POST'),
    put: write('PUT'),
    patch: write('PATCH'),
  }
}

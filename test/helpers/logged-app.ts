// The real app on a fresh database with its info-level log lines captured as parsed JSON, for
// tests that check what a route writes to the log (and what it must never write).
import type { Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { Writable } from 'node:stream'
import pino from 'pino'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { NO_LOAD_SHEDDING } from './app.js'
import { createTestDatabase } from './database.js'

export async function buildAppWithLogLines(
  t: Test,
  apiKey: string,
): Promise<{ app: FastifyInstance; lines: Record<string, unknown>[] }> {
  const lines: Record<string, unknown>[] = []
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line))
      done()
    },
  })
  const db = await createTestDatabase(t)
  const app = await buildApp({
    config: loadConfig({ API_KEYS: apiKey, LOG_LEVEL: 'info', ...NO_LOAD_SHEDDING }),
    sql: db.sql,
    logger: pino({ level: 'info' }, stream),
  })
  t.teardown(() => app.close())
  return { app, lines }
}

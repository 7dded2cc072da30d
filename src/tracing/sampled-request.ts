// The context of the sampled request whose code is running, if any. The statements' and the
// rate-limit decisions' spans take it as their parent. An AsyncLocalStorage of our own, entered
// only by sampled requests, so that every statement of an unsampled one costs one getStore()
// (OpenTelemetry's context.active() goes through its global registry, costing several times more).
import { AsyncLocalStorage } from 'node:async_hooks'
import type { Context } from '@opentelemetry/api'

export const sampledRequest = new AsyncLocalStorage<Context>()

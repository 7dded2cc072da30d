// autocannon ships no types; the benchmarks use a handful of fields of its result.
declare module 'autocannon' {
  interface Result {
    requests: { average: number; total: number }
    latency: { p50: number; p99: number }
    non2xx: number
    errors: number
    /** seconds the run lasted, to 10 ms */
    duration: number
  }
  /** The run: awaitable for its result, and an event emitter while it goes. */
  interface Instance extends Promise<Result> {
    on(event: 'response', listener: (client: unknown, statusCode: number) => void): this
    /** Ends the run early (its promise then resolves with what was measured). */
    stop(): void
  }
  export default function autocannon(options: Record<string, unknown>): Instance
}

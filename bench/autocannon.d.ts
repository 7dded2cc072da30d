// autocannon ships no types; the benchmark uses a handful of fields of its result.
declare module 'autocannon' {
  interface Result {
    requests: { average: number }
    latency: { p50: number; p99: number }
    non2xx: number
    errors: number
  }
  export default function autocannon(options: Record<string, unknown>): Promise<Result>
}

// The seed of a generated sweep: fixed by default, so every `make test` tries the same inputs and
// a check such as "every link reached" does not depend on luck. `<NAME>=random` draws a new one
// for a longer exploratory run (printed by the caller, so a failure can be reproduced with
// `<NAME>=<seed>`); `<NAME>=<integer>` replays one.
export function sweepSeed(variable: string, fixed: number): number {
  const value = process.env[variable]
  if (value === undefined || value === '') return fixed
  if (value === 'random') return Math.floor(Math.random() * 2 ** 31)
  const seed = Number(value)
  if (!Number.isInteger(seed)) throw new Error(`${variable} must be an integer or "random", got "${value}"`)
  return seed
}

// The RateLimit field is written directly for the common case; it must be exactly what
// structured-headers serializes for the same values.
import t from 'tap'
import fc from 'fast-check'
import { serializeList } from 'structured-headers'
import { rateLimit, rateLimitPolicy } from '../../src/rate-limit/ietf-headers.js'
import { sweepSeed } from '../helpers/sweep-seed.js'

// Fixed, so every run tries the same pairs (FC_SEED=<n> or FC_SEED=random for others).
const SEED = sweepSeed('FC_SEED', 20261207)

const library = (r: number, s: number) =>
  serializeList([
    [
      'default',
      new Map([
        ['r', r],
        ['t', s],
      ]),
    ],
  ])

t.test('RateLimit is the structured-field serialization of its two integers', async (t) => {
  for (const [r, s] of [
    [0, 0],
    [1, 60],
    [99, 1],
    [999_999_999_999_999, 3600],
  ] as const)
    t.equal(rateLimit(r, s), library(r, s))
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 999_999_999_999_999 }),
      fc.integer({ min: 0, max: 86_400 }),
      (r, s) => rateLimit(r, s) === library(r, s),
    ),
    { numRuns: 2000, seed: SEED },
  )
  t.pass(`2,000 generated pairs agree (seed ${SEED})`)
})

t.test('values outside sf-integers are left to structured-headers', async (t) => {
  t.equal(rateLimit(1.5, 1), library(1.5, 1), 'a fraction: the library writes a decimal')
  t.throws(() => rateLimit(1e16, 1), 'a 16-digit number: the library refuses it')
  t.equal(rateLimitPolicy(100, 60_000), '"default";q=100;w=60')
})

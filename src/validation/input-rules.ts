// Values no part of a request may carry, whatever its schema says: PostgreSQL refuses NUL in
// text (22021) and lone surrogates in jsonb (22P02), and replacing them would store something
// the client never sent; a JSON number that is not finite, or an integer past ±(2^53−1), would
// be stored as null or rounded.

// With the `u` flag a surrogate pair is one code point, so \p{Cs} matches lone surrogates only.
const LONE_SURROGATE = /\p{Cs}/u

/** Why a string cannot be accepted, or null. */
export function unacceptableString(value: string): string | null {
  if (value.includes('\u0000')) return 'contains a NUL character'
  if (LONE_SURROGATE.test(value)) return 'contains a lone UTF-16 surrogate'
  return null
}

/** Why a number cannot be accepted, or null. */
export function unacceptableNumber(value: number): string | null {
  if (!Number.isFinite(value)) return 'is not a finite number'
  if (Number.isInteger(value) && !Number.isSafeInteger(value)) return 'is an integer outside ±(2^53−1)'
  return null
}

/** The schemaPath of a 422 item found by these rules at parse time (src/plugins/app/json-body.ts):
 * it takes the code of the field that holds the value (src/validation/validation-errors.ts). */
export const INPUT_RULE_SCHEMA_PATH = '#/input-rules'

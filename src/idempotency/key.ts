/** The Idempotency-Key format of the contract: 1..128 printable ASCII characters. */
export const IDEMPOTENCY_KEY_PATTERN = /^[ -~]{1,128}$/

export const isValidIdempotencyKey = (value: unknown): value is string =>
  typeof value === 'string' && IDEMPOTENCY_KEY_PATTERN.test(value)

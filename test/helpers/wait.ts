// Waiting on a condition instead of a fixed sleep: polls until `check` returns an answer, and
// fails with `what` after a generous deadline (a loaded 2-core machine can be slow, so the
// deadline is a guard against a hang, not a claim about speed). `false`, `undefined` and `null`
// mean "not yet": a read that finds nothing (a missing row, a null column) must not pass for an
// answer. A caller that waits for a null on purpose says so with `nullIsAnAnswer`.
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  options?: { timeoutMs?: number; everyMs?: number; nullIsAnAnswer?: false },
): Promise<Exclude<T, null | undefined | false>>
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  options: { timeoutMs?: number; everyMs?: number; nullIsAnAnswer: true },
): Promise<Exclude<T, undefined | false>>
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  {
    timeoutMs = 30_000,
    everyMs = 10,
    nullIsAnAnswer = false,
  }: { timeoutMs?: number; everyMs?: number; nullIsAnAnswer?: boolean } = {},
): Promise<T | null> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value !== undefined && value !== false && (value !== null || nullIsAnAnswer)) return value
    if (Date.now() > deadline) throw new Error(`gave up waiting (${timeoutMs} ms) for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
}

/** Resolves `promise`'s value, or fails with `what` after a generous deadline instead of hanging. */
export async function within<T>(what: string, promise: Promise<T>, timeoutMs = 30_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`gave up waiting (${timeoutMs} ms) for ${what}`)), timeoutMs)
  })
  try {
    return await Promise.race([promise, expired])
  } finally {
    clearTimeout(timer)
  }
}

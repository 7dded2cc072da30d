// IANA time-zone check shared by the generated validators and the schedule policy.
// It is embedded into generated/validators.cjs by tools/generate.ts, so it must stay a
// self-contained function (no imports, no closures).
export function isIanaTimeZone(value: string): boolean {
  if (typeof value !== 'string' || !/^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/.test(value)) return false
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: value })
    return true
  } catch {
    return false
  }
}

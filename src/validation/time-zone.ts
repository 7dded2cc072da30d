// IANA time-zone check shared by the generated validators and the schedule policy.
// It is embedded into generated/validators.cjs by tools/generate.ts, so it must stay a
// self-contained function (no imports, no closures): its memo hangs off the function itself.
export function isIanaTimeZone(value: string): boolean {
  if (typeof value !== 'string' || !/^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/.test(value)) return false
  // Asking Intl builds a formatter (about 50 µs). Zones it accepts are remembered, case-folded
  // as Intl matches them, so the memo is bounded by the zone database; refusals are not kept.
  const self = isIanaTimeZone as typeof isIanaTimeZone & { accepted?: Set<string> }
  self.accepted ??= new Set<string>()
  const accepted = self.accepted
  const folded = value.toLowerCase()
  if (accepted.has(folded)) return true
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: value })
  } catch {
    return false
  }
  accepted.add(folded)
  return true
}

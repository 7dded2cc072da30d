// RFC 3339 date-times the service can store and compare: PostgreSQL and JavaScript Dates both
// misbehave outside years 1..9999, and a leap second (`:60`) names no instant they represent.
// Self-contained (no imports, no outer names): tools/generate.ts embeds its source in the
// standalone validators.

/** True for an RFC 3339 date-time that, after its offset, falls in 0001-01-01..9999-12-31 UTC. */
export function isBoundedDateTime(value: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/.exec(
    value,
  )
  if (!m) return false
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ]
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
  const daysInMonth = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
  if (daysInMonth === undefined || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59) return false
  const offsetHours = m[9] === undefined ? 0 : Number(m[9])
  const offsetMinutes = m[10] === undefined ? 0 : Number(m[10])
  if (offsetHours > 23 || offsetMinutes > 59) return false
  const millis = m[7] === undefined ? 0 : Number(`${m[7]}00`.slice(0, 3))
  const instant = new Date(0)
  // setUTCFullYear, not Date.UTC: Date.UTC maps years 0..99 to 1900..1999.
  instant.setUTCFullYear(year, month - 1, day)
  instant.setUTCHours(hour, minute, second, millis)
  const utc = instant.getTime() - (m[8] === '-' ? -1 : 1) * (offsetHours * 60 + offsetMinutes) * 60_000
  return utc >= -62135596800000 && utc <= 253402300799999
}

// Scanning JSON text without parsing it (the body prescans and the parse-time depth check).

/**
 * Index of the quote that closes the string opening at `start` (-1 if none): the first quote not
 * preceded by an odd run of backslashes.
 */
export function closingQuote(text: string, start: number): number {
  let end = text.indexOf('"', start + 1)
  while (end > 0) {
    let slashes = 0
    while (text.charCodeAt(end - 1 - slashes) === 0x5c) slashes++
    if (slashes % 2 === 0) return end
    end = text.indexOf('"', end + 1)
  }
  return -1
}

// Requests for the Swagger UI's assets that could reach outside their folder.

/** Anything under /docs/static that could leave the asset folder once decoded. */
export function escapesStaticFolder(url: string): boolean {
  let path = url.split('?')[0]!
  // Decode repeatedly so that double-encoded dots and slashes are seen too.
  for (let i = 0; i < 3; i++) {
    try {
      const decoded = decodeURIComponent(path)
      if (decoded === path) break
      path = decoded
    } catch {
      return true
    }
  }
  return (
    path.includes('\\') || path.includes('\0') || path.split('/').some((segment) => segment === '..' || segment === '.')
  )
}

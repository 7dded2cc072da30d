// Writes a copy of an OpenAPI document in which every operation states the security
// requirement it inherits from the document's root. `redocly diff` compares operations'
// own `security` only, so an operation that names its scopes where it used to inherit the
// root requirement would read as "authentication became required" when nothing changed for
// callers. Usage: node tools/inherit-security.mjs IN OUT
import { readFileSync, writeFileSync } from 'node:fs'
import { parse, stringify } from 'yaml'

const [input, output] = process.argv.slice(2)
const doc = parse(readFileSync(input, 'utf8'))
const methods = ['get', 'put', 'post', 'patch', 'delete', 'options', 'head', 'trace']
for (const item of Object.values(doc.paths ?? {})) {
  for (const method of methods) {
    const op = item[method]
    if (op && op.security === undefined && doc.security !== undefined) op.security = structuredClone(doc.security)
  }
}
writeFileSync(output, stringify(doc))

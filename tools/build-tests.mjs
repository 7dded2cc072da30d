// `npm test` runs the tests as JavaScript: every TypeScript file of src/, handlers/, generated/,
// test/ and tools/ is transpiled once into .build/ (esbuild: types are stripped, not checked; `make
// typecheck` checks them). Each test file, and each server a test starts, then loads plain
// JavaScript instead of paying for a TypeScript loader of its own.
import { cpSync, readdirSync, rmSync } from 'node:fs'
import path from 'node:path'
import { build } from 'esbuild'

const OUT = '.build'
const typeScript = (dir, { recursive }) =>
  readdirSync(dir, { recursive, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))
    .map((file) => path.join(dir, file))

rmSync(OUT, { recursive: true, force: true })
await build({
  entryPoints: [
    ...['src', 'handlers', 'generated', 'test'].flatMap((dir) => typeScript(dir, { recursive: true })),
    // The key tool the tests call (tools/sdk/ is a package of its own).
    ...typeScript('tools', { recursive: false }),
  ],
  outdir: OUT,
  outbase: '.',
  format: 'esm',
  platform: 'node',
  target: 'node22',
  sourcemap: true,
  logLevel: 'warning',
})
// What src/ reads beside its code: the Ajv validators and the API document (src/spec.ts).
cpSync('generated', `${OUT}/generated`, { recursive: true, filter: (f) => !f.endsWith('.ts') })

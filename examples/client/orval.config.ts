// orval config for a client of the Study Service (docs/integrators.md): a fetch client from the
// served document saved as ./openapi.json. `headers: true` keeps the required Idempotency-Key
// header parameter (orval drops header parameters without it). A plain object, not
// `defineConfig`, so that it loads under `npx` without orval installed next to it.
export default {
  study: {
    input: { target: './openapi.json' },
    output: { target: './orval/client.ts', client: 'fetch', headers: true, mode: 'single', prettier: false, clean: true },
  },
}

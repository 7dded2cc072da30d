// orval for `make sdk-check`: a fetch client from the served document. `headers: true` keeps
// the required Idempotency-Key (orval drops header parameters without it).
module.exports = {
  study: {
    input: { target: process.env.SDK_SPEC ?? './.out/openapi.json' },
    output: {
      target: './.out/orval/client.ts',
      client: 'fetch',
      headers: true,
      baseUrl: process.env.SDK_BASE_URL ?? '',
      mode: 'single',
      prettier: false,
      clean: true,
    },
  },
}

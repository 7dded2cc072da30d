// StrykerJS over the core that guards data and access, one module at a time (MODULE=<name>), each
// with the test files that cover it. Run from the repository root: `make mutation` (all modules)
// or `make mutation MODULE=auth`. Stryker copies the project into .stryker-tmp/, puts every mutant
// of the module into the TypeScript at once (switched on by an environment variable, which the
// servers a test starts inherit), transpiles the tests into .build/ as `npm test` does, then runs
// for each mutant only the test files that reached it (perTest coverage, one "test" per file).
// Incremental files (tools/mutation/incremental/, a git-ignored cache written by the run) hold each
// module's last full results on this checkout, but Stryker reuses none: it does not read the built test files, so every test looks new and every mutant is
// retested. MUTATION_MUTATE narrows a run to given ranges; the others keep their earlier results.
const modules = {
  idempotency: {
    // The loop, the request's key, the stores, and the reply helper that sends the answer.
    mutate: ['src/idempotency/**/*.ts', 'src/http/send-answer.ts'],
    tests: [
      'idempotency/other-unique-violations',
      'idempotency/hashed-properties',
      'idempotency/expiry',
      'idempotency/key-and-scope',
      'users/create-user',
      'idempotency/request-hash',
      'idempotency/learner-writes',
      'idempotency/partners',
      'idempotency/rolling-upgrade',
      'idempotency/concurrent-twins',
      // a row changed after its read: decided again, then 409 CONCURRENT_UPDATE
      'idempotency/one-statement-writes',
      // a secret is sent once and never stored (shownOnce)
      'auth/admin-keys',
    ],
  },
  auth: {
    mutate: ['src/auth/**/*.ts'],
    tests: [
      'auth/scope-matrix',
      'auth/key-registry',
      'auth/key-limits-and-logs',
      'auth/keys-on-one-connection',
      'auth/systems',
      'auth/key-file',
      'auth/guards',
      // stored keys: the registry's replacement, the sync and its listener
      'auth/stored-key-sync',
      'auth/admin-keys',
      'scale/key-propagation',
    ],
  },
  // The events' lifecycle: partitions, archiving, retention.
  'telemetry-lifecycle': {
    mutate: ['src/telemetry/lifecycle.ts', 'src/repositories/telemetry-lifecycle.ts'],
    // A mutant runs its covering files in this order until one fails: the short edge file first.
    tests: ['telemetry/lifecycle-edges', 'telemetry/lifecycle', 'telemetry/erasure'],
  },
  // A session's erasure (eraseSession); its archived days are erased in the lifecycle's tests.
  'telemetry-erasure': {
    mutate: ['src/repositories/telemetry.ts:218-228', 'src/repositories/telemetry.ts:251-259'],
    tests: ['telemetry/erasure', 'telemetry/lifecycle'],
  },
  users: {
    mutate: ['src/repositories/users.ts'],
    tests: ['users/user-repository', 'users/create-user', 'users/update-user', 'idempotency/hashed-properties'],
  },
  conspectuses: {
    mutate: ['src/repositories/conspectuses.ts', 'src/pagination/keyset-page.ts'],
    tests: [
      'pagination/keyset-page',
      'conspectuses/conspectuses',
      'conspectuses/error-log',
      'schedule/leitner',
      'users/learner-data',
    ],
  },
}

const name = process.env.MODULE
const module = modules[name]
if (!module) throw new Error(`MODULE must be one of: ${Object.keys(modules).join(', ')} (got ${name})`)

export default {
  packageManager: 'npm',
  testRunner: 'tap',
  plugins: ['@stryker-mutator/tap-runner'],
  // MUTATION_MUTATE="file:line:column-line:column ...": only these ranges are mutated and tested;
  // the module's other mutants keep their results from the incremental file.
  mutate: process.env.MUTATION_MUTATE ? process.env.MUTATION_MUTATE.split(/\s+/).filter(Boolean) : module.mutate,
  buildCommand: 'node tools/build-tests.mjs',
  tap: {
    testFiles: module.tests.map((file) => `.build/test/${file}.test.js`),
    nodeArgs: ['--enable-source-maps', '-r', '{{hookFile}}', '{{testFile}}'],
  },
  coverageAnalysis: 'perTest',
  checkers: [],
  // Two cores shared with others: one test process at a time beside Stryker itself.
  concurrency: Number(process.env.STRYKER_CONCURRENCY ?? 1),
  timeoutMS: 60_000,
  timeoutFactor: 2,
  disableTypeChecks: true,
  incremental: true,
  incrementalFile: `tools/mutation/incremental/${name}.json`,
  ignorePatterns: [
    '.build',
    '.cache',
    '.tap',
    '.data',
    'dist',
    'bench/.runs',
    'tools/sdk/node_modules',
    'tools/mutation',
    'examples/client/generated',
  ],
  tempDirName: '.stryker-tmp',
  cleanTempDir: true,
  // The incremental file is the full report (mutation-testing-report-schema): run.mjs reads it.
  reporters: ['clear-text', 'progress-append-only'],
  thresholds: { high: 90, low: 80, break: null },
}

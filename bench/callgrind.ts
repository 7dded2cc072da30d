// valgrind's flags for counting a server's instructions with callgrind, shared by
// `make bench-instructions` and `make bench-otel-instructions`.

/** Callgrind with instrumentation off until the warm-up is over, one output file per process in `dir`. */
export const callgrindArgs = (dir: string): string[] => [
  '--tool=callgrind',
  // Off until the warm-up is over: instrumented, starting takes longer than Fastify waits for a plugin.
  '--instr-atstart=no',
  '--smc-check=all-non-file',
  `--callgrind-out-file=${dir}/out.%p`,
  '--dump-instr=no',
]

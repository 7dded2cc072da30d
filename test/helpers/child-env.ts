// The environment and command line for a process a test starts (a server, a shell, a build).
// tap's process tracker (@tapjs/processinfo, for coverage) puts itself into NODE_OPTIONS of every
// process spawned below a test: coverage is off, and those processes are not tests, so they start
// without it (it costs each Node.js process a loader and its source maps).
const TAP_PROCESSINFO = /"?--import=[^\s"]*@tapjs[\\/]processinfo[^\s"]*"?/g

/** This process's environment with `extra`, and NODE_OPTIONS without tap's tracker. */
export function childEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra }
  const options = env.NODE_OPTIONS?.replace(TAP_PROCESSINFO, '').trim()
  if (options) env.NODE_OPTIONS = options
  else delete env.NODE_OPTIONS
  return env
}

/**
 * `command args` for spawn: the tracker's spawn hook writes NODE_OPTIONS back into whatever
 * environment a test passes, so env(1) sets `env`'s own value last, just before the command runs
 * (same process id: env execs it).
 */
export function untracked(command: string, args: readonly string[], env: NodeJS.ProcessEnv): [string, string[]] {
  const nodeOptions = env.NODE_OPTIONS ? [`NODE_OPTIONS=${env.NODE_OPTIONS}`] : ['-u', 'NODE_OPTIONS']
  return ['env', [...nodeOptions, command, ...args]]
}

// The environment for a process a test starts (a server, a shell, a build). tap puts its process
// tracker (@tapjs/processinfo, for coverage) into NODE_OPTIONS, so every node process below a
// test would load it too; coverage is off, and those processes are not tests: they start without.
const TAP_PROCESSINFO = /--import=\S*@tapjs[\\/]processinfo\S*/g

export function childEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra }
  const options = env.NODE_OPTIONS?.replace(TAP_PROCESSINFO, '').trim()
  if (options) env.NODE_OPTIONS = options
  else delete env.NODE_OPTIONS
  return env
}

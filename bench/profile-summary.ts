// Where the service's CPU time goes, from a V8 profile written by `BENCH_PROFILE=dir make bench`:
// self time summed into categories of the service's work, as shares of the busy time
// (idle excluded), then the top functions. Usage: npx tsx bench/profile-summary.ts <dir|file>
import { readdirSync, readFileSync, statSync } from 'node:fs'
import path from 'node:path'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}
interface Profile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

// First match wins: an application file by its folder, a dependency by its package.
const CATEGORIES: [string, RegExp][] = [
  ['idle', /^\(idle\)/],
  ['garbage collection', /^\(garbage collector\)/],
  ['SQL: postgres.js protocol', /node_modules\/postgres\//],
  ['socket writes (PostgreSQL and HTTP)', /^(writeBuffer|writev|writeUtf8String|writeLatin1String) $/],
  ['validation (Ajv)', /node_modules\/ajv|\/validation\/|generated\/validators/],
  ['rate limiting', /@fastify\/rate-limit|\/rate-limit\//],
  ['ioredis', /ioredis|redis-parser|cluster-key-slot|standard-as-callback|denque/],
  ['auth (API-key hashing)', /\/auth\/|\/plugins\/auth|internal\/crypto\/hash/],
  ['request ids', /\/plugins\/request-id|internal\/crypto\/random/],
  ['idempotency (hashing, replay)', /\/idempotency\/|safe-stable-stringify/],
  ['serialization (fast-json-stringify)', /fast-json-stringify/],
  ['JSON parsing', /secure-json-parse|\/plugins\/json-body/],
  ['metrics', /prom-client|fastify-metrics|\/plugins\/metrics/],
  ['logging', /node_modules\/pino|\/plugins\/request-log/],
  ['handlers and repositories', /\/handlers\/|\/repositories\/|\/schedule\//],
  ['start-up (module loading, spec parsing)', /node_modules\/yaml|internal\/modules|openapi-glue|@fastify\/swagger/],
  ['Fastify and routing', /node_modules\/(fastify|find-my-way|avvio|light-my-request)\//],
  [
    'promises, timers and scheduling',
    /^\((program)\)|^runMicrotasks|task_queues|internal\/timers|^processTicksAndRejections/,
  ],
  [
    'Node HTTP and streams',
    /node:_http|node:internal\/streams|node:net|node:internal\/stream_base|node:events|node:buffer/,
  ],
]

const target = process.argv[2]
if (!target) throw new Error('usage: profile-summary <profile dir or .cpuprofile file>')
// In a folder, the newest main-thread profile: Node names them CPU.<date>.<time>.<pid>.<thread>.<n>,
// and a loader such as tsx adds a worker thread's (thread 1) that holds none of the requests.
const file = statSync(target).isDirectory()
  ? path.join(
      target,
      readdirSync(target)
        .filter((f) => /\.\d+\.0\.\d+\.cpuprofile$/.test(f))
        .sort()
        .at(-1)!,
    )
  : target
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile
const byId = new Map(profile.nodes.map((n) => [n.id, n]))
const selfTime = new Map<number, number>()
profile.samples.forEach((id, i) => {
  selfTime.set(id, (selfTime.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
})

const categories = new Map<string, number>()
const functions = new Map<string, number>()
const uncategorised = new Set<string>()
let busy = 0
for (const [id, micros] of selfTime) {
  const { functionName, url, lineNumber } = byId.get(id)!.callFrame
  const label = `${functionName || '(anonymous)'} ${url}`
  const category = CATEGORIES.find(([, pattern]) => pattern.test(label))?.[0] ?? 'other'
  categories.set(category, (categories.get(category) ?? 0) + micros)
  if (category === 'idle') continue
  busy += micros
  const where = url
    ? `${url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/dist\//, '')}:${lineNumber + 1}`
    : '(native)'
  const key = `${functionName || '(anonymous)'} ${where}`
  functions.set(key, (functions.get(key) ?? 0) + micros)
  if (category === 'other') uncategorised.add(key)
}

const share = (micros: number) => `${((100 * micros) / busy).toFixed(1).padStart(5)} %`
console.log(
  `${path.basename(file)}: ${(busy / 1e6).toFixed(1)} s busy, ${((categories.get('idle') ?? 0) / 1e6).toFixed(1)} s idle\n`,
)
console.log('Share of busy time by category:')
for (const [name, micros] of [...categories].filter(([n]) => n !== 'idle').sort((a, b) => b[1] - a[1]))
  console.log(`${share(micros)}  ${name}`)
console.log('\nTop functions (self time):')
for (const [name, micros] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, 20))
  console.log(`${share(micros)}  ${name}`)
if (process.env.SHOW_OTHER) {
  console.log('\nUncategorised:')
  for (const [name, micros] of [...functions]
    .filter(([n]) => uncategorised.has(n))
    .sort((a, b) => b[1] - a[1])
    .slice(0, 25))
    console.log(`${share(micros)}  ${name}`)
}

// compose.yaml's scale-out shape runs production settings: APP_ENV=prod with PostgreSQL, partner
// keys from a file given as a secret (no API_KEYS, so no development key), and nothing published
// beyond 127.0.0.1. Each replica's environment is checked by the service's own configuration rules.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { parse } from 'yaml'
import { loadConfig } from '../../src/config.js'
import { projectRoot } from '../../src/paths.js'
import { keyFileText, makeKey } from '../../src/auth/make-key.js'
import { dockerExcludes } from '../helpers/dockerignore.js'

interface ComposeService {
  environment?: Record<string, string>
  ports?: string[]
  secrets?: string[]
  build?: string
}
const composeText = readFileSync(path.join(projectRoot, 'compose.yaml'), 'utf8')
const compose = parse(composeText, { merge: true }) as {
  services: Record<string, ComposeService>
  secrets?: Record<string, { file: string }>
}
const replicas = Object.entries(compose.services).filter(([, service]) => service.build === '.')

t.test('three replicas of the image, each with production settings and keys from a file', async (t) => {
  t.equal(replicas.length, 3, 'three replicas built from the Dockerfile')
  const dir = mkdtempSync(path.join(os.tmpdir(), 'compose-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  // The key file the header's `make key` line writes.
  t.match(composeText, /make key ID=ops SCOPES=keys:admin KEYS_FILE=partner-keys\.json/)
  const keyFile = path.join(dir, 'partner-keys.json')
  writeFileSync(keyFile, keyFileText([makeKey({ ID: 'ops', SCOPES: 'keys:admin' }).entry]))

  for (const [name, service] of replicas) {
    const env = service.environment ?? {}
    t.equal(env.APP_ENV, 'prod', `${name}: APP_ENV=prod`)
    t.notOk('API_KEYS' in env, `${name}: no plain API_KEYS (nor the development key)`)
    t.notOk('DATABASE_EMBEDDED' in env, `${name}: never the embedded database`)
    const secret = /^\/run\/secrets\/(.+)$/.exec(env.API_KEYS_FILE ?? '')?.[1]
    t.ok(secret && service.secrets?.includes(secret), `${name}: API_KEYS_FILE is a secret it is given`)
    t.equal(compose.secrets?.[secret!]?.file, './partner-keys.json', `${name}: the secret is the file make key writes`)
    const config = loadConfig({ ...env, API_KEYS_FILE: keyFile })
    t.match(config, { appEnv: 'prod', apiKeys: [], databaseEmbedded: false }, `${name}: the service accepts it`)
    t.match(config.databaseUrl, /^postgres:\/\/[^@]+@postgres:5432\//, `${name}: on the compose PostgreSQL`)
    t.equal(config.apiKeyEntries[0]?.id, 'ops', `${name}: the file's key`)
  }
})

t.test('nothing is published beyond 127.0.0.1, and the key file never enters git or the image', async (t) => {
  const published = Object.entries(compose.services).flatMap(([name, s]) => (s.ports ?? []).map((p) => [name, p]))
  t.ok(published.length > 0, 'HAProxy is published')
  for (const [name, port] of published) t.match(port, /^127\.0\.0\.1:\d+:\d+$/, `${name}: ${port} on loopback`)
  t.ok(dockerExcludes()('partner-keys.json'), '.dockerignore keeps it out of the build context')
  const checked = execFileSync('git', ['-C', projectRoot, 'check-ignore', 'partner-keys.json'], { encoding: 'utf8' })
  t.equal(checked.trim(), 'partner-keys.json', '.gitignore keeps it out of commits')
})

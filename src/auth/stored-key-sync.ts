// Keeps the registry's stored keys equal to the database's usable secrets. The invariant: after
// a change to a key commits, its notification (sent in the same transaction) makes every replica
// re-read that key; whenever the LISTEN is (re)established, every key is re-read, because
// notifications sent while it was away are lost. Re-reads run one at a time, in the order they
// were asked for, so a slower older read never overwrites a newer one.
// test/scale/key-propagation.test.ts holds this with two replicas.
import type { FastifyBaseLogger } from 'fastify'
import type { Sql } from '../db/client.js'
import { listen, type Listener } from '../db/listener.js'
import { type ApiKeyRepository, KEY_CHANGES_CHANNEL, type StoredSecretRow } from '../repositories/api-keys.js'
import type { ApiKeyIdentity, ApiKeyRegistry, StoredSecret } from './api-keys.js'

export interface StoredKeySync {
  /** Re-reads one key now (the replica that changed it does not wait for its notification). */
  changed(keyId: string): Promise<void>
  /** Records that a stored key answered: at most one write per key and hour from this replica. */
  used(identity: ApiKeyIdentity, now?: number): void
  close(): Promise<void>
}

export interface StoredKeySyncOptions {
  registry: ApiKeyRegistry
  keys: ApiKeyRepository
  log: FastifyBaseLogger
  /** The pool to listen with; absent (the embedded database: one process, one connection), no LISTEN. */
  listenWith?: Sql
  /** A stored key's max_body_bytes_in_flight is held to this range (the process's client share). */
  bodyBytesRange: { min: number; max: number }
}

const HOUR_MS = 3_600_000

export async function startStoredKeySync(options: StoredKeySyncOptions): Promise<StoredKeySync> {
  const { registry, keys, log, bodyBytesRange } = options

  const identities = new Map<string, ApiKeyIdentity>()
  const toSecret = (row: StoredSecretRow): StoredSecret => {
    let identity = identities.get(row.key_id)
    if (!identity) {
      const bytes = row.max_body_bytes_in_flight === null ? null : Number(row.max_body_bytes_in_flight)
      identity = Object.freeze({
        id: row.key_id,
        scopes: new Set(row.scopes),
        systems: row.systems && new Set(row.systems.map((s) => s.toLowerCase())),
        rateLimit:
          row.rate_limit_max === null ? null : { max: row.rate_limit_max, windowMs: row.rate_limit_window_ms! },
        maxConcurrentRequests: row.max_concurrent_requests,
        maxBodyBytesInFlight: bytes === null ? null : Math.min(Math.max(bytes, bodyBytesRange.min), bodyBytesRange.max),
        stored: true,
        partner: row.partner,
        fullAccess: false,
        expiresAt: row.key_expires_at?.getTime() ?? null,
        partnerRoot: registry.partnerRoot(row.partner),
      })
      identities.set(row.key_id, identity)
    }
    return { digest: row.digest, expiresAt: row.expires_at?.getTime() ?? null, identity }
  }
  const readAll = async () => {
    identities.clear()
    registry.replaceStored((await keys.usableSecrets()).map(toSecret))
  }
  const readKey = async (keyId: string) => {
    identities.delete(keyId)
    registry.replaceStoredKey(keyId, (await keys.usableSecrets(keyId)).map(toSecret))
  }

  // One re-read at a time, in order. A failed one (the database away) is followed by a full re-read.
  let queue: Promise<void> = Promise.resolve()
  let retry: NodeJS.Timeout | undefined
  let closed = false
  const enqueue = (read: () => Promise<void>): Promise<void> => {
    queue = queue.then(read).catch((err: unknown) => {
      log.warn({ err }, 'stored API keys: re-read failed; every key is re-read in a second')
      if (!closed && retry === undefined)
        retry = setTimeout(() => {
          retry = undefined
          void enqueue(readAll)
        }, 1000)
    })
    return queue
  }

  let listener: Listener | undefined
  if (options.listenWith) {
    let ready: () => void
    const first = new Promise<void>((resolve) => (ready = resolve))
    listener = listen(options.listenWith, {
      channel: KEY_CHANGES_CHANNEL,
      onNotify: (keyId) => void enqueue(() => readKey(keyId)),
      onReady: () => void enqueue(readAll).then(ready),
      // The start does not wait for a database that is away: the keys are read once it is back.
      onError: (err) => {
        log.warn({ err }, 'stored API keys: LISTEN failed; retrying')
        ready()
      },
    })
    await first
  } else {
    await enqueue(readAll)
  }

  // The hour each stored key was last recorded in, by this replica.
  const recorded = new Map<string, number>()
  return {
    changed: (keyId) => enqueue(() => readKey(keyId)),
    used(identity, now = Date.now()) {
      const hour = Math.floor(now / HOUR_MS)
      if (recorded.get(identity.id) === hour) return
      recorded.set(identity.id, hour)
      keys.markUsed(identity.id).catch((err: unknown) => log.warn({ err }, 'stored API keys: last_used_at not written'))
    },
    async close() {
      closed = true
      clearTimeout(retry)
      await listener?.close()
      await queue
    },
  }
}

// SQL for partner keys as data (tables api_keys, api_key_secrets, admin_audit). Secrets are
// stored as SHA-256 digests only. Every change notifies the channel `api_keys` with the key's id
// in the same transaction, so every replica hears of it when, and only when, it commits.
import type { PendingQuery, Row } from 'postgres'
import type { Db } from '../db/client.js'
import type { TimeKeyPosition } from '../pagination/cursor.js'
import { keysetPage } from '../pagination/keyset-page.js'
import type { components } from '../../generated/api.js'

export type ApiKeyView = components['schemas']['ApiKey']
export type AuditEntry = components['schemas']['AdminAuditEntry']
export type AdminAction = AuditEntry['action']

/** The channel every replica listens on; the payload is the changed key's id. */
export const KEY_CHANGES_CHANNEL = 'api_keys'

export interface NewApiKey {
  id: string
  prefix: string
  digest: Buffer
  scopes: string[]
  systems: string[] | null
  rateLimit: { max: number; window_ms: number } | null
  maxConcurrentRequests: number | null
  maxBodyBytesInFlight: number | null
  expiresAt: string | null
}

/** Who acted, for the audit row. */
export interface Actor {
  keyId: string
  requestId: string
}

/** A usable secret of a key that is neither revoked nor expired, with what the key grants. */
export interface StoredSecretRow {
  key_id: string
  digest: Buffer
  /** the earlier of the secret's and the key's expiry; null: none */
  expires_at: Date | null
  scopes: string[]
  systems: string[] | null
  rate_limit_max: number | null
  rate_limit_window_ms: number | null
  max_concurrent_requests: number | null
  max_body_bytes_in_flight: string | null
}

export function createApiKeyRepository(db: Db) {
  // One key as the contract shows it: never a digest.
  const view = (where: PendingQuery<Row[]>) => db<(ApiKeyView & { position_ts: string })[]>`
    select k.id, k.prefix,
           case when k.revoked_at is not null then 'revoked'
                when k.expires_at <= now() then 'expired' else 'active' end as status,
           k.scopes, k.systems,
           case when k.rate_limit_max is null then null
                else json_build_object('max', k.rate_limit_max, 'window_ms', k.rate_limit_window_ms) end as rate_limit,
           k.max_concurrent_requests, k.max_body_bytes_in_flight::float8 as max_body_bytes_in_flight,
           k.created_at, k.created_by, k.expires_at, k.revoked_at, k.last_used_at,
           case when k.revoked_at is null then
             (select max(s.expires_at) from api_key_secrets s where s.key_id = k.id and s.expires_at > now())
           end as previous_secret_expires_at,
           to_char(k.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as position_ts
    from api_keys k ${where}`
  const withoutPosition = ({ position_ts: _omit, ...key }: ApiKeyView & { position_ts: string }): ApiKeyView => key

  const audit = (actor: Actor, action: AdminAction, keyId: string) => db`
    insert into admin_audit (actor_key_id, action, target_key_id, request_id)
    values (${actor.keyId}, ${action}, ${keyId}, ${actor.requestId})`
  const notify = (keyId: string) => db`select pg_notify(${KEY_CHANGES_CHANNEL}, ${keyId})`
  const get = async (keyId: string): Promise<ApiKeyView | null> => {
    const [row] = await view(db`where k.id = ${keyId}`)
    return row ? withoutPosition(row) : null
  }

  return {
    /** Inserts the key, its secret and the audit row; null when the id is taken. Run in a transaction. */
    async create(key: NewApiKey, actor: Actor): Promise<ApiKeyView | null> {
      const inserted = await db`
        insert into api_keys (id, prefix, scopes, systems, rate_limit_max, rate_limit_window_ms,
                              max_concurrent_requests, max_body_bytes_in_flight, created_by, expires_at)
        values (${key.id}, ${key.prefix}, ${key.scopes}, ${key.systems}, ${key.rateLimit?.max ?? null},
                ${key.rateLimit?.window_ms ?? null}, ${key.maxConcurrentRequests}, ${key.maxBodyBytesInFlight},
                ${actor.keyId}, ${key.expiresAt})
        on conflict (id) do nothing
        returning id`
      if (inserted.length === 0) return null
      await db`insert into api_key_secrets (digest, key_id) values (${key.digest}, ${key.id})`
      await audit(actor, 'key.create', key.id)
      await notify(key.id)
      return (await get(key.id))!
    },

    /**
     * Adds a secret and lets the key's usable older ones live `overlapSeconds` more at most.
     * 'missing' or 'revoked' when it cannot. Run in a transaction (the key row is locked).
     */
    async roll(
      keyId: string,
      secret: { digest: Buffer; prefix: string },
      overlapSeconds: number,
      actor: Actor,
    ): Promise<ApiKeyView | 'missing' | 'revoked'> {
      const [key] = await db<{ revoked: boolean }[]>`
        select revoked_at is not null as revoked from api_keys where id = ${keyId} for update`
      if (!key) return 'missing'
      if (key.revoked) return 'revoked'
      await db`
        update api_key_secrets
        set expires_at = least(coalesce(expires_at, 'infinity'), now() + make_interval(secs => ${overlapSeconds}))
        where key_id = ${keyId} and (expires_at is null or expires_at > now())`
      await db`insert into api_key_secrets (digest, key_id) values (${secret.digest}, ${keyId})`
      await db`update api_keys set prefix = ${secret.prefix} where id = ${keyId}`
      await audit(actor, 'key.roll', keyId)
      await notify(keyId)
      return (await get(keyId))!
    },

    /** Revokes the key (once: a revoked key keeps its time and gets no second audit row); null when missing. */
    async revoke(keyId: string, actor: Actor): Promise<ApiKeyView | null> {
      const revoked = await db`
        update api_keys set revoked_at = now() where id = ${keyId} and revoked_at is null returning id`
      if (revoked.length > 0) {
        await audit(actor, 'key.revoke', keyId)
        await notify(keyId)
      }
      return get(keyId)
    },

    get,

    /** Up to `limit` keys after `after` (exclusive) by (created_at, id), plus the position of the last one. */
    async page(options: { after?: TimeKeyPosition; limit: number }) {
      const rows = await view(
        options.after
          ? db`where (k.created_at, k.id) > (${options.after.created_at}::text::timestamptz, ${options.after.id}) order by k.created_at, k.id limit ${options.limit + 1}`
          : db`order by k.created_at, k.id limit ${options.limit + 1}`,
      )
      return keysetPage(rows, options.limit, (row) => row.id)
    },

    /** Up to `limit` audit entries before `before` (exclusive), newest first; `keyId` keeps one key's. */
    async auditPage(options: { keyId?: string; before?: number; limit: number }) {
      const rows = await db<AuditEntry[]>`
        select audit_id::float8 as audit_id, at, actor_key_id, action, target_key_id, request_id
        from admin_audit
        where true
          ${options.keyId === undefined ? db`` : db`and target_key_id = ${options.keyId}`}
          ${options.before === undefined ? db`` : db`and audit_id < ${options.before}`}
        order by audit_id desc
        limit ${options.limit + 1}`
      const items = rows.slice(0, options.limit)
      const last = items[items.length - 1]
      return { items, next: rows.length > options.limit && last ? last.audit_id : null }
    },

    /** The usable secrets: of every key, or of one. */
    async usableSecrets(keyId?: string): Promise<StoredSecretRow[]> {
      return db<StoredSecretRow[]>`
        select s.key_id, s.digest,
               case when s.expires_at is null then k.expires_at
                    when k.expires_at is null then s.expires_at
                    else least(s.expires_at, k.expires_at) end as expires_at,
               k.scopes, k.systems, k.rate_limit_max, k.rate_limit_window_ms,
               k.max_concurrent_requests, k.max_body_bytes_in_flight
        from api_key_secrets s join api_keys k on k.id = s.key_id
        where k.revoked_at is null
          and (s.expires_at is null or s.expires_at > now())
          and (k.expires_at is null or k.expires_at > now())
          ${keyId === undefined ? db`` : db`and s.key_id = ${keyId}`}`
    },

    /** Records use in the current hour; at most one write per key and hour, whoever calls. */
    async markUsed(keyId: string): Promise<void> {
      await db`
        update api_keys set last_used_at = date_trunc('hour', now())
        where id = ${keyId} and (last_used_at is null or last_used_at < date_trunc('hour', now()))`
    },
  }
}

export type ApiKeyRepository = ReturnType<typeof createApiKeyRepository>

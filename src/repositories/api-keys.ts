// SQL for partner keys as data (tables api_keys, api_key_secrets, admin_audit). Secrets are
// stored as SHA-256 digests only. Every change notifies the channel `api_keys` with the key's id
// in the same transaction, so every replica hears of it when, and only when, it commits.
// Ids compare without case (a unique index on lower(id)); a key's `partner` is its root
// configured key, and a row written by the previous release (no partner) reads its creator.
// Every read and change an admin asks for is bounded by its reach (see `Reach`).
import type { PendingQuery, Row } from 'postgres'
import type { Db } from '../db/client.js'
import { appError } from '../errors.js'
import {
  type Answer,
  type AnswerStore,
  answerIdempotently,
  type IdempotentRequest,
  inTransaction,
} from '../idempotency/index.js'
import type { TimeKeyPosition } from '../pagination/cursor.js'
import { keysetPage } from '../pagination/keyset-page.js'
import type { components } from '../../generated/api.js'

export type ApiKeyView = components['schemas']['ApiKey']
export type AuditEntry = components['schemas']['AdminAuditEntry']
export type AdminAction = AuditEntry['action']

/** The channel every replica listens on; the payload is the changed key's id. */
export const KEY_CHANGES_CHANNEL = 'api_keys'

/** What a key is granted, resolved against the service's defaults (src/auth/authority.ts decides it). */
export interface Grant {
  scopes: string[]
  systems: string[] | null
  rateLimit: { max: number; window_ms: number } | null
  maxConcurrentRequests: number | null
  maxBodyBytesInFlight: number | null
  /** RFC 3339; null: never */
  expiresAt: string | null
}

/** A key to store: what it is granted, its id, partner and secret's digest. */
export interface NewApiKey extends Grant {
  id: string
  partner: string
  prefix: string
  digest: Buffer
}

/** Who acted, for the audit row: the server's own request id, and the client's X-Request-Id when it sent one. */
export interface Actor {
  keyId: string
  requestId: string
  clientRequestId?: string | null
}

/** A rate limit as a number of requests in a window. */
export interface RateQuota {
  max: number
  windowMs: number
}

/**
 * The limits a key holds, each resolved (a key without its own holds the service's default), to
 * compare one key's with another's.
 */
export interface HeldLimits {
  scopes: readonly string[]
  /** null: every system */
  systems: readonly string[] | null
  rate: RateQuota
  maxConcurrentRequests: number
  maxBodyBytesInFlight: number
  /** null: never expires */
  expiresAt: Date | null
}

/**
 * The keys an admin may see and act on: 'all' (an API_KEYS key), or the keys of one partner
 * that hold nothing beyond `limits`: exactly the keys the admin could have created.
 */
export type Reach =
  | 'all'
  | { partner: string; limits: HeldLimits; defaults: Omit<HeldLimits, 'scopes' | 'systems' | 'expiresAt'> }

/** A usable secret of a key that is neither revoked nor expired, with what the key grants. */
export interface StoredSecretRow {
  key_id: string
  partner: string
  /** the key's own expiry (its secrets may stop earlier) */
  key_expires_at: Date | null
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
  /** The condition that keeps the keys within `reach` (on `api_keys k`). */
  const within = (reach: Reach): PendingQuery<Row[]> => {
    if (reach === 'all') return db`true`
    const { partner, limits: l, defaults: d } = reach
    // A rate is within another's when its burst (max) and its long-run rate (max per window) are.
    return db`
      coalesce(k.partner, k.created_by) = ${partner}
      and k.scopes <@ ${l.scopes as string[]}::text[]
      and (${l.systems as string[] | null}::uuid[] is null or k.systems <@ ${l.systems as string[] | null}::uuid[])
      and (${l.expiresAt}::timestamptz is null or k.expires_at <= ${l.expiresAt}::timestamptz)
      and coalesce(k.max_concurrent_requests, ${d.maxConcurrentRequests}) <= ${l.maxConcurrentRequests}
      and coalesce(k.max_body_bytes_in_flight, ${d.maxBodyBytesInFlight}) <= ${l.maxBodyBytesInFlight}
      and coalesce(k.rate_limit_max, ${d.rate.max}) <= ${l.rate.max}
      and coalesce(k.rate_limit_max, ${d.rate.max})::float8 * ${l.rate.windowMs}
          <= ${l.rate.max}::float8 * coalesce(k.rate_limit_window_ms, ${d.rate.windowMs})`
  }

  // One key as the contract shows it: never a digest.
  const view = (where: PendingQuery<Row[]>) => db<(ApiKeyView & { position_ts: string })[]>`
    select k.id, k.prefix, coalesce(k.partner, k.created_by) as partner,
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

  const audit = (actor: Actor, action: AdminAction, keyIds: readonly string[]) => db`
    insert into admin_audit (actor_key_id, action, target_key_id, request_id, client_request_id)
    select ${actor.keyId}, ${action}, id, ${actor.requestId}, ${actor.clientRequestId ?? null}
    from unnest(${keyIds as string[]}::text[]) with ordinality as t (id, n) order by n`
  const notify = (keyIds: readonly string[]) =>
    db`select pg_notify(${KEY_CHANGES_CHANNEL}, id) from unnest(${keyIds as string[]}::text[]) as t (id)`
  /** The key with this id (any case), if it is within `reach`. */
  const get = async (keyId: string, reach: Reach): Promise<ApiKeyView | null> => {
    const [row] = await view(db`where lower(k.id) = lower(${keyId}) and ${within(reach)}`)
    return row ? withoutPosition(row) : null
  }

  return {
    /**
     * Whether a stored creator may still create: it holds a share lock on the creator's row until
     * the transaction ends, so a revocation either comes first (and this answers false) or
     * waits for the new key, which its cascade then reaches. Run in a transaction.
     */
    async creatorUsable(creatorId: string): Promise<boolean> {
      const [row] = await db<{ usable: boolean }[]>`
        select revoked_at is null and (expires_at is null or expires_at > now()) as usable
        from api_keys where id = ${creatorId} for share`
      return row?.usable === true
    },

    /** Inserts the key, its secret and the audit row; null when the id is taken (in any case). Run in a transaction. */
    async create(key: NewApiKey, actor: Actor): Promise<ApiKeyView | null> {
      const inserted = await db`
        insert into api_keys (id, partner, prefix, scopes, systems, rate_limit_max, rate_limit_window_ms,
                              max_concurrent_requests, max_body_bytes_in_flight, created_by, expires_at)
        values (${key.id}, ${key.partner}, ${key.prefix}, ${key.scopes}, ${key.systems}, ${key.rateLimit?.max ?? null},
                ${key.rateLimit?.window_ms ?? null}, ${key.maxConcurrentRequests}, ${key.maxBodyBytesInFlight},
                ${actor.keyId}, ${key.expiresAt})
        on conflict do nothing
        returning id`
      if (inserted.length === 0) return null
      await db`insert into api_key_secrets (digest, key_id) values (${key.digest}, ${key.id})`
      await audit(actor, 'key.create', [key.id])
      await notify([key.id])
      return (await get(key.id, 'all'))!
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
      reach: Reach,
    ): Promise<ApiKeyView | 'missing' | 'revoked'> {
      const [key] = await db<{ id: string; revoked: boolean }[]>`
        select k.id, k.revoked_at is not null as revoked from api_keys k
        where lower(k.id) = lower(${keyId}) and ${within(reach)} for update`
      if (!key) return 'missing'
      if (key.revoked) return 'revoked'
      keyId = key.id
      await db`
        update api_key_secrets
        set expires_at = least(coalesce(expires_at, 'infinity'), now() + make_interval(secs => ${overlapSeconds}))
        where key_id = ${keyId} and (expires_at is null or expires_at > now())`
      await db`insert into api_key_secrets (digest, key_id) values (${secret.digest}, ${keyId})`
      await db`update api_keys set prefix = ${secret.prefix} where id = ${keyId}`
      await audit(actor, 'key.roll', [keyId])
      await notify([keyId])
      return (await get(keyId, 'all'))!
    },

    /**
     * Revokes the key and every key it created, theirs too, each once (a revoked key keeps its
     * time and gets no second audit row), each with its audit row and its notification; null
     * when the key is missing or out of reach. Run in a transaction.
     */
    async revoke(keyId: string, actor: Actor, reach: Reach): Promise<{ key: ApiKeyView; revoked: string[] } | null> {
      // Locked first: a creation by this key in flight (it holds a share lock on it) commits
      // before, and each statement below reads anew, so the cascade reaches its key.
      const [target] = await db<{ id: string }[]>`
        select k.id from api_keys k where lower(k.id) = lower(${keyId}) and ${within(reach)} for update`
      if (!target) return null
      const revoked = (
        await db<{ id: string }[]>`
          update api_keys set revoked_at = now() where id = ${target.id} and revoked_at is null returning id`
      ).map((row) => row.id)
      // Keys created by revoked keys of this tree, until none is left (a key created meanwhile
      // by one of them shows up in the next round).
      for (;;) {
        const reached = await db<{ id: string }[]>`
          with recursive tree (id) as (
            select ${target.id}::text
            union
            select k.id from api_keys k join tree t on k.created_by = t.id
          )
          update api_keys k set revoked_at = now()
          from tree where k.id = tree.id and k.revoked_at is null
          returning k.id`
        if (reached.length === 0) break
        revoked.push(...reached.map((row) => row.id).sort())
      }
      if (revoked.length > 0) {
        await audit(actor, 'key.revoke', revoked)
        await notify(revoked)
      }
      return { key: (await get(target.id, 'all'))!, revoked }
    },

    get,

    /** Up to `limit` keys within `reach` after `after` (exclusive) by (created_at, id), plus the position of the last one. */
    async page(options: { after?: TimeKeyPosition; limit: number; reach: Reach }) {
      const rows = await view(
        options.after
          ? db`where ${within(options.reach)} and (k.created_at, k.id) > (${options.after.created_at}::text::timestamptz, ${options.after.id}) order by k.created_at, k.id limit ${options.limit + 1}`
          : db`where ${within(options.reach)} order by k.created_at, k.id limit ${options.limit + 1}`,
      )
      return keysetPage(rows, options.limit, (row) => row.id)
    },

    /**
     * Up to `limit` audit entries on keys within `reach`, before `before` (exclusive), newest
     * first; `keyId` (any case) keeps one key's.
     */
    async auditPage(options: { keyId?: string; before?: number; limit: number; reach: Reach }) {
      const rows = await db<AuditEntry[]>`
        select a.audit_id::float8 as audit_id, a.at, a.actor_key_id, a.action, a.target_key_id, a.request_id,
               a.client_request_id
        from admin_audit a
        ${options.reach === 'all' ? db`` : db`join api_keys k on k.id = a.target_key_id and ${within(options.reach)}`}
        where true
          ${options.keyId === undefined ? db`` : db`and lower(a.target_key_id) = lower(${options.keyId})`}
          ${options.before === undefined ? db`` : db`and a.audit_id < ${options.before}`}
        order by a.audit_id desc
        limit ${options.limit + 1}`
      const items = rows.slice(0, options.limit)
      const last = items[items.length - 1]
      return { items, next: rows.length > options.limit && last ? last.audit_id : null }
    },

    /** The usable secrets: of every key, or of one. */
    async usableSecrets(keyId?: string): Promise<StoredSecretRow[]> {
      return db<StoredSecretRow[]>`
        select s.key_id, coalesce(k.partner, k.created_by) as partner, k.expires_at as key_expires_at, s.digest,
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

/**
 * The idempotent writes of keys (src/idempotency/): each in one transaction with its answer's
 * record; the new secret is in the answer sent, never in the one stored (a replay answers without it).
 */
export function createApiKeyWrites(db: AnswerStore) {
  return {
    /**
     * POST /api/v1/admin/keys: `decide` (once no answer is stored) checks the request and gives
     * the key to store. A stored creator revoked meanwhile creates nothing (401), and one revoked
     * later takes this key with it; an id taken, in any case, is 409.
     */
    create(
      request: IdempotentRequest,
      decide: () => NewApiKey,
      secret: string,
      actor: Actor,
      storedCreator: string | null,
    ): Promise<Answer> {
      return answerIdempotently(db, request, {
        store: () => {
          const key = decide()
          return inTransaction(db, request, async (tx) => {
            const keys = createApiKeyRepository(tx)
            if (storedCreator !== null && !(await keys.creatorUsable(storedCreator)))
              throw appError('SECURITY_AUTH_REQUIRED')
            const created = await keys.create(key, actor)
            if (!created) throw appError('ADMIN_KEY_ID_TAKEN')
            return { status: 201, body: created, shownOnce: { secret } }
          })
        },
      })
    },

    /**
     * POST /api/v1/admin/keys/{key_id}/roll: a new secret, the older ones kept `overlapSeconds`
     * more at most. Resolves to the answer and the key's id as stored (the one asked for when
     * the answer is replayed).
     */
    async roll(
      request: IdempotentRequest,
      keyId: string,
      issued: { digest: Buffer; prefix: string; secret: string },
      overlapSeconds: number,
      actor: Actor,
      reach: Reach,
    ): Promise<{ answer: Answer; keyId: string }> {
      let rolled = keyId
      const answer = await answerIdempotently(db, request, {
        store: () =>
          inTransaction(db, request, async (tx) => {
            const key = await createApiKeyRepository(tx).roll(keyId, issued, overlapSeconds, actor, reach)
            if (key === 'missing') throw appError('ADMIN_KEY_NOT_FOUND')
            if (key === 'revoked') throw appError('ADMIN_KEY_REVOKED')
            rolled = key.id
            return { status: 200, body: key, shownOnce: { secret: issued.secret } }
          }),
      })
      return { answer, keyId: rolled }
    },
  }
}

import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ServiceError, serialisedBytes } from '../../runtime/index.js';
import { LOCK_KIND, lockActorKey, lockKeyOf, lockNamespacePrefix, lockTenantPrefix, viewOfStoredLock, type LockHolder, type LockMessage, type LockView, type StoredLock } from '../../actors/locks/messages.js';
import { snapshotGroups, snapshotsPage } from '../partition-scatter.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';
import { requireAdmin } from './admin.js';

/** Distributed locks with fencing tokens (spec doc 1 §4.7, conventions "Distributed locks"). */
const NAME = Type.String({ minLength: 1, maxLength: 256, pattern: '^[^\\u0000-\\u001f\\u007f]+$' });
const Params = Type.Object({ namespace: NAME, key: NAME });
const OWNER = Type.String({ minLength: 1, maxLength: 256 });
const LOCK_ID = Type.String({ minLength: 1, maxLength: 64 });
const TTL = Type.Integer({ minimum: 1, maximum: 86_400 });
/** Metadata is stored with the lock; bounded so one lock cannot hold megabytes. */
const METADATA_BYTES_MAX = 16 * 1024;

const AcquireBody = Type.Object({
  owner_id: OWNER,
  ttl_seconds: Type.Optional(TTL),
  metadata: Type.Optional(Type.Unknown({ description: 'Any JSON value, up to 16 KiB serialised.' })),
});
const ExtendBody = Type.Object({ lock_id: LOCK_ID, owner_id: OWNER, ttl_seconds: Type.Optional(TTL) });
const ReleaseBody = Type.Object({ lock_id: LOCK_ID, owner_id: OWNER });

const Nullable = <T extends ReturnType<typeof Type.String>>(schema: T) => Type.Union([schema, Type.Null()]);
const AcquiredLock = Type.Object({
  lock_id: Type.String(),
  namespace: Type.String(),
  key: Type.String(),
  owner_id: Type.String(),
  fence_token: Type.Integer(),
  acquired_at: Type.String({ format: 'date-time' }),
  expires_at: Type.String({ format: 'date-time' }),
  ttl_seconds: Type.Integer(),
  metadata: Type.Unknown(),
});
const LockStatus = Type.Object({
  namespace: Type.String(),
  key: Type.String(),
  is_locked: Type.Boolean(),
  lock_id: Nullable(Type.String()),
  owner_id: Nullable(Type.String()),
  fence_token: Type.Integer({ description: 'The holder\'s token, or the last one issued (0 if never locked).' }),
  acquired_at: Nullable(Type.String({ format: 'date-time' })),
  expires_at: Nullable(Type.String({ format: 'date-time' })),
  time_remaining_ms: Type.Integer(),
  metadata: Type.Unknown(),
});
const ExtendedLock = Type.Object({
  lock_id: Type.String(),
  namespace: Type.String(),
  key: Type.String(),
  owner_id: Type.String(),
  fence_token: Type.Integer(),
  expires_at: Type.String({ format: 'date-time' }),
  ttl_seconds: Type.Integer(),
});

type LockParams = Static<typeof Params>;

/** The administrators' list (GET /admin/locks...): a tenant is a user id or an organization id. */
const TENANT = Type.String({ minLength: 1, maxLength: 128, pattern: '^[^\\u0000-\\u001f\\u007f]+$', description: 'The tenant: a user id, or an organization id.' });
const AdminPaging = {
  page: Type.Optional(Type.Integer({ minimum: 0, description: '1-based; 0 reads as 1.' })),
  page_size: Type.Optional(Type.Integer({ minimum: 0, description: 'Default 20, capped at 100.' })),
};
const NamespacesQuery = Type.Object({ tenant: TENANT, ...AdminPaging });
const AdminLocksQuery = Type.Object({ tenant: TENANT, namespace: NAME, ...AdminPaging });
const NamespacesPage = Type.Object({
  pagination: Pagination,
  namespaces: Type.Array(Type.Object({ namespace: Type.String(), key_count: Type.Integer({ description: 'Keys of the namespace ever locked.' }) })),
  unlisted_keys: Type.Integer({ description: 'Always 0: every stored lock is listed (kept for clients of the earlier directory, which stopped listing at 1,000,000 keys).' }),
});
const AdminLocksPage = Type.Object({ pagination: Pagination, locks: Type.Array(LockStatus) });

function adminPaging(query: { page?: number; page_size?: number }) {
  const page = Math.max(1, query.page ?? 1);
  const page_size = Math.min(100, query.page_size || 20);
  return { page, page_size, offset: (page - 1) * page_size };
}

function acquiredShape(params: LockParams, holder: LockHolder) {
  return {
    lock_id: holder.lock_id,
    namespace: params.namespace,
    key: params.key,
    owner_id: holder.owner_id,
    fence_token: holder.fence_token,
    acquired_at: isoTime(holder.acquired_at_ms)!,
    expires_at: isoTime(holder.expires_at_ms)!,
    ttl_seconds: holder.ttl_seconds,
    metadata: holder.metadata ?? null,
  };
}

function statusShape(params: LockParams, view: LockView) {
  const holder = view.holder;
  return {
    namespace: params.namespace,
    key: params.key,
    is_locked: holder !== null,
    lock_id: holder?.lock_id ?? null,
    owner_id: holder?.owner_id ?? null,
    fence_token: holder?.fence_token ?? view.last_fence_token,
    acquired_at: isoTime(holder?.acquired_at_ms),
    expires_at: isoTime(holder?.expires_at_ms),
    time_remaining_ms: holder ? Math.max(0, holder.expires_at_ms - view.now_ms) : 0,
    metadata: holder?.metadata ?? null,
  };
}

export function lockRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const path = '/api/v1/distributed-state/:namespace/:key/lock';
  const ask = (tenant: string, params: LockParams, message: LockMessage) =>
    // A status read is safe to send again if its first delivery's outcome is unknown (cluster failover).
    services.actors.ask<LockView>(LOCK_KIND, lockActorKey(tenant, params.namespace, params.key), message, { readOnly: message.op === 'status' });

  app.get<{ Querystring: Static<typeof NamespacesQuery> }>('/admin/locks/namespaces', {
    onRequest: authenticate,
    schema: {
      tags: ['locks', 'admin'],
      summary: 'Admin: the namespaces a tenant has locked keys in, with their key counts, in name order.',
      security: bearerSecurity,
      querystring: NamespacesQuery,
      response: { 200: NamespacesPage, ...errorResponses(...bearerErrors, 403) },
    },
  }, async (request) => {
    requireAdmin(request);
    const { page, page_size, offset } = adminPaging(request.query);
    // Read from where the locks are stored: each partition groups the tenant's lock keys by namespace.
    const groups = await snapshotGroups(services.actors, services.config.partitions, LOCK_KIND, lockTenantPrefix(request.query.tenant));
    return {
      pagination: { page, page_size, total: groups.length, has_more: offset + page_size < groups.length },
      namespaces: groups.slice(offset, offset + page_size).map(({ group, count }) => ({ namespace: group, key_count: count })),
      unlisted_keys: 0,
    };
  });

  app.get<{ Querystring: Static<typeof AdminLocksQuery> }>('/admin/locks', {
    onRequest: authenticate,
    schema: {
      tags: ['locks', 'admin'],
      summary: "Admin: a tenant's locks in one namespace, in key order, each with its live holder, fence token and expiry.",
      security: bearerSecurity,
      querystring: AdminLocksQuery,
      response: { 200: AdminLocksPage, ...errorResponses(...bearerErrors, 403) },
    },
  }, async (request) => {
    requireAdmin(request);
    const { tenant, namespace } = request.query;
    const { page, page_size, offset } = adminPaging(request.query);
    // A scatter-gather of partition reads: each lock's committed record, seen at this moment.
    const listed = await snapshotsPage(services.actors, services.config.partitions, LOCK_KIND, lockNamespacePrefix(tenant, namespace), offset, page_size);
    const now = services.clock.now();
    return {
      pagination: { page, page_size, total: listed.total, has_more: offset + page_size < listed.total },
      locks: listed.entries.map(([actorKey, stored]) => statusShape({ namespace, key: lockKeyOf(actorKey) }, viewOfStoredLock(stored as StoredLock, now))),
    };
  });

  app.get<{ Params: LockParams }>(path, {
    onRequest: authenticate,
    schema: {
      tags: ['locks'],
      summary: 'Lock status. A free key answers is_locked false with the last fence token.',
      security: bearerSecurity,
      params: Params,
      response: { 200: LockStatus, ...errorResponses(...bearerErrors) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    return statusShape(request.params, await ask(principal.tenant, request.params, { op: 'status' }));
  });

  app.post<{ Params: LockParams; Body: Static<typeof AcquireBody> }>(path, {
    onRequest: authenticate,
    schema: {
      tags: ['locks'],
      summary: 'Acquire. Held by another owner: 409 lock_held. The holder acquiring again gets the current lock.',
      security: bearerSecurity,
      params: Params,
      body: AcquireBody,
      response: { 200: AcquiredLock, ...errorResponses(...bearerErrors, 409) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { owner_id, ttl_seconds = 30, metadata } = request.body;
    if (metadata !== undefined && serialisedBytes(metadata) > METADATA_BYTES_MAX) {
      throw new ServiceError('BAD_REQUEST', `metadata must serialise to at most ${METADATA_BYTES_MAX} bytes.`, {
        details: [{ field: 'body.metadata', message: 'is too large' }],
      });
    }
    const view = await ask(principal.tenant, request.params, { op: 'acquire', owner_id, ttl_seconds, metadata });
    return acquiredShape(request.params, view.holder!);
  });

  app.patch<{ Params: LockParams; Body: Static<typeof ExtendBody> }>(path, {
    onRequest: authenticate,
    schema: {
      tags: ['locks'],
      summary: "Extend. Expiry becomes now + ttl_seconds (default: the lock's current ttl_seconds, the one it was acquired or last extended with).",
      security: bearerSecurity,
      params: Params,
      body: ExtendBody,
      response: { 200: ExtendedLock, ...errorResponses(...bearerErrors, 409) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { lock_id, owner_id, ttl_seconds } = request.body;
    const view = await ask(principal.tenant, request.params, { op: 'extend', lock_id, owner_id, ttl_seconds });
    const holder = view.holder!;
    return {
      lock_id: holder.lock_id,
      namespace: request.params.namespace,
      key: request.params.key,
      owner_id: holder.owner_id,
      fence_token: holder.fence_token,
      expires_at: isoTime(holder.expires_at_ms)!,
      ttl_seconds: holder.ttl_seconds,
    };
  });

  app.delete<{ Params: LockParams; Body: Static<typeof ReleaseBody> }>(path, {
    onRequest: authenticate,
    schema: {
      tags: ['locks'],
      summary: 'Release. Not the holder: 409 lock_not_held.',
      security: bearerSecurity,
      params: Params,
      body: ReleaseBody,
      response: { 204: Type.Null(), ...errorResponses(...bearerErrors, 409) },
    },
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const { lock_id, owner_id } = request.body;
    await ask(principal.tenant, request.params, { op: 'release', lock_id, owner_id });
    return reply.code(204).send();
  });
}

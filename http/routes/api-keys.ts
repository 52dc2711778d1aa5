import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { API_KEY_KIND, USER_API_KEYS_KIND } from '../../actors/api-keys/messages.js';
import { type ApiKeyMessage, type ApiKeyView, type IndexPage, type UserApiKeysMessage } from '../../actors/api-keys/messages.js';
import { ORGANIZATION_KIND } from '../../actors/organizations/messages.js';
import { isServiceError, ServiceError } from '../../runtime/index.js';
import { API_KEY_SCOPES, API_KEYS_PER_USER_MAX, newApiKey } from '../auth/api-keys.js';
import { bearerAuthentication, refuseImpersonation, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, MessageBody, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';

/**
 * API keys of the calling user (spec doc 1 §2 ApiKey/ApiKeyCreated, §4.2,
 * §5.6). The full key is in the create reply only; afterwards only its
 * `key_prefix`. Keys belong to a user: another user's key id is 404. A key
 * created with an `org_id` acts for that organization (its tenant), which
 * the user must belong to, now and on every request (plugins/authenticate.ts). These
 * routes refuse API keys themselves (a leaked key must not mint more keys):
 * see the scope rules in http/auth/api-keys.ts and docs/api/api-keys.md.
 */
const NULLABLE_TIME = Type.Union([Type.String({ format: 'date-time' }), Type.Null()]);
const Scope = Type.Union(API_KEY_SCOPES.map((scope) => Type.Literal(scope)), { description: 'A scope of the catalog in docs/api/api-keys.md.' });
const Scopes = Type.Array(Scope, { minItems: 1, maxItems: API_KEY_SCOPES.length * 2 });
const Name = Type.String({ minLength: 1, maxLength: 100 });
const KEY_ID = /^[0-9a-f]{32}$/;

const ApiKeyFields = {
  api_key_id: Type.String(),
  name: Type.String(),
  key_prefix: Type.String({ description: 'The first 12 characters of the key (pk_ and 9 characters of its id).' }),
  scopes: Type.Array(Type.String()),
  org_id: Type.Union([Type.String(), Type.Null()], {
    description: 'The organization the key acts for (its resources are the organization\'s), or null: the key acts for its user.',
  }),
  created_at: Type.String({ format: 'date-time' }),
  expires_at: NULLABLE_TIME,
};
const ApiKey = Type.Object(
  { ...ApiKeyFields, last_used_at: NULLABLE_TIME, revoked: Type.Boolean() },
  { title: 'ApiKey' },
);
const ApiKeyCreated = Type.Object(
  { ...ApiKeyFields, key: Type.String({ description: 'The full key, pk_<key_id>_<secret>. Shown only here.' }) },
  { title: 'ApiKeyCreated' },
);

const CreateBody = Type.Object({
  name: Name,
  scopes: Scopes,
  expires_at: Type.Optional(Type.Union([Type.String({ format: 'date-time', maxLength: 64 }), Type.Null()])),
  org_id: Type.Optional(
    Type.Union([Type.String({ pattern: '^org_[A-Za-z0-9_-]{1,64}$' }), Type.Null()], {
      description: 'An organization the caller belongs to: the key then acts for it (its tenant). Absent or null: the key acts for the caller.',
    }),
  ),
});
const UpdateBody = Type.Object({
  name: Type.Optional(Name),
  scopes: Type.Optional(Scopes),
  revoked: Type.Optional(Type.Boolean({ description: 'true revokes the key for good; false on a revoked key is 409.' })),
});
const KeyParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });
const ListQuery = Type.Object({
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
});

function apiKeyShape(view: ApiKeyView) {
  return {
    api_key_id: view.api_key_id,
    name: view.name,
    key_prefix: view.key_prefix,
    scopes: view.scopes,
    org_id: view.org_id ?? null,
    created_at: isoTime(view.created_at_ms)!,
    expires_at: isoTime(view.expires_at_ms),
    last_used_at: isoTime(view.last_used_at_ms),
    revoked: view.revoked,
  };
}

function cleanName(name: string): string {
  const trimmed = name.trim();
  if (trimmed.length === 0) {
    throw new ServiceError('BAD_REQUEST', 'name must not be blank.', { details: [{ field: 'name', message: 'must not be blank' }] });
  }
  return trimmed;
}

function keyId(id: string): string {
  if (!KEY_ID.test(id)) throw new ServiceError('not_found', 'No such API key.');
  return id;
}

export function apiKeyRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const base = '/api/v1/auth/api-keys';
  const tags = ['auth'];
  const askKey = <T>(api_key_id: string, message: ApiKeyMessage) => services.actors.ask<T>(API_KEY_KIND, api_key_id, message);
  // Creating and deleting a key are flows of the user's index (actors/api-keys/index-state.ts): one ask each.
  const askIndex = <T>(user_id: string, message: UserApiKeysMessage) => services.actors.ask<T>(USER_API_KEYS_KIND, user_id, message);

  app.get<{ Querystring: Static<typeof ListQuery> }>(base, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: "The caller's API keys, newest first (deleted keys are not listed; revoked and expired ones are).",
      security: bearerSecurity,
      querystring: ListQuery,
      response: { 200: Type.Object({ api_keys: Type.Array(ApiKey), pagination: Pagination }), ...errorResponses(...bearerErrors, 403) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const page = Math.max(1, request.query.page ?? 1);
    const page_size = Math.min(100, request.query.page_size || 20);
    // A read-only gather: the page of ids from the index, then each key.
    const index = await services.actors.ask<IndexPage>(USER_API_KEYS_KIND, principal.user_id, { op: 'list', page, page_size }, { readOnly: true });
    const views = await Promise.all(
      index.api_key_ids.map((id) =>
        services.actors.ask<ApiKeyView>(API_KEY_KIND, id, { op: 'get', user_id: principal.user_id }, { readOnly: true }).catch((error: unknown) => {
          // An index entry whose key is gone (a crash between the two writes): skip it.
          if (error instanceof ServiceError && error.code === 'not_found') return null;
          throw error;
        }),
      ),
    );
    return {
      api_keys: views.filter((view): view is ApiKeyView => view !== null).map(apiKeyShape),
      pagination: { page, page_size, total: index.total, has_more: page * page_size < index.total },
    };
  });

  app.post<{ Body: Static<typeof CreateBody> }>(base, {
    onRequest: authenticate,
    // The full key is shown once: an Idempotency-Key replay must not keep it (http/secret-responses.ts).
    config: { secretResponse: true },
    schema: {
      tags,
      summary: 'Create an API key, for the caller or (org_id) for one of their organizations. The full key is in this reply only. At most 100 keys per user (409 api_key_limit_reached).',
      security: bearerSecurity,
      body: CreateBody,
      response: { 201: ApiKeyCreated, ...errorResponses(...bearerErrors, 403, 404, 409) },
    },
  }, async (request, reply) => {
    const principal = refuseImpersonation(request);
    const name = cleanName(request.body.name);
    const scopes = [...new Set(request.body.scopes)];
    let expires_at_ms: number | null = null;
    if (request.body.expires_at !== undefined && request.body.expires_at !== null) {
      expires_at_ms = Date.parse(request.body.expires_at);
      if (!Number.isFinite(expires_at_ms) || expires_at_ms <= services.clock.now()) {
        throw new ServiceError('BAD_REQUEST', 'expires_at must be an RFC 3339 time in the future.', {
          details: [{ field: 'expires_at', message: 'must be in the future' }],
        });
      }
    }
    const org_id = request.body.org_id ?? null;
    if (org_id !== null) {
      // Only a member may make a key that acts for the organization; a stranger gets the same 404 as for an unknown one.
      try {
        await services.actors.ask(ORGANIZATION_KIND, org_id, { op: 'get_member', user_id: principal.user_id }, { readOnly: true });
      } catch (error) {
        if (isServiceError(error) && error.code === 'not_found') throw new ServiceError('not_found', 'No such organization.');
        throw error;
      }
    }
    const fresh = newApiKey();
    // The index checks the cap and takes the place in one turn, then creates the key; it answers with the key.
    const view = await askIndex<ApiKeyView>(principal.user_id, {
      op: 'create',
      api_key_id: fresh.api_key_id,
      limit: API_KEYS_PER_USER_MAX,
      key: { org_id, name, scopes, key_hash: fresh.key_hash, key_prefix: fresh.key_prefix, expires_at_ms },
    });
    const { last_used_at: _used, revoked: _revoked, ...shown } = apiKeyShape(view);
    return reply.code(201).send({ ...shown, key: fresh.key });
  });

  app.get<{ Params: Static<typeof KeyParams> }>(`${base}/:id`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: 'One of the caller\'s API keys (key_prefix only, never the key).',
      security: bearerSecurity,
      params: KeyParams,
      response: { 200: ApiKey, ...errorResponses(...bearerErrors, 403, 404) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    return apiKeyShape(await askKey<ApiKeyView>(keyId(request.params.id), { op: 'get', user_id: principal.user_id }));
  });

  app.patch<{ Params: Static<typeof KeyParams>; Body: Static<typeof UpdateBody> }>(`${base}/:id`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: 'Rename, change scopes, or revoke (revoked: true, permanent). Takes effect on the next request.',
      security: bearerSecurity,
      params: KeyParams,
      body: UpdateBody,
      response: { 200: ApiKey, ...errorResponses(...bearerErrors, 403, 404, 409) },
    },
  }, async (request) => {
    const principal = refuseImpersonation(request);
    const id = keyId(request.params.id);
    const body = request.body ?? {};
    const message: Extract<ApiKeyMessage, { op: 'update' }> = { op: 'update', user_id: principal.user_id };
    if (body.name !== undefined) message.name = cleanName(body.name);
    if (body.scopes !== undefined) message.scopes = [...new Set(body.scopes)];
    if (body.revoked !== undefined) message.revoked = body.revoked;
    return apiKeyShape(await askKey<ApiKeyView>(id, message));
  });

  app.delete<{ Params: Static<typeof KeyParams> }>(`${base}/:id`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: 'Delete an API key: it stops working at once and is no longer listed.',
      security: bearerSecurity,
      params: KeyParams,
      response: { 200: MessageBody, ...errorResponses(...bearerErrors, 403, 404) },
    },
  }, async (request) => {
    const principal = refuseImpersonation(request);
    const id = keyId(request.params.id);
    // The key checks its owner (404 for anyone else's) and deletes itself; the index then drops it from the list.
    await askIndex(principal.user_id, { op: 'delete', api_key_id: id });
    return { message: 'API key deleted.' };
  });
}

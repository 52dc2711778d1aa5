import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError } from '../../runtime/index.js';
import { DIRECTORY_KIND, USER_KIND } from '../../actors/accounts/messages.js';
import { USER_API_KEYS_KIND } from '../../actors/api-keys/messages.js';
import { DIRECTORY_KEY, USER_QUERY_MAX, type UserListQuery } from '../../actors/accounts/messages.js';
import { sessionUserId, type AdminPatch, type BanRecord, type PublicUser, type Role, type SessionView, type UserMessage } from '../../actors/accounts/messages.js';
import { Accounts, type ClientInfo } from '../auth/accounts.js';
import type { Principal } from '../auth/principal.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, MessageBody, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';
import { UserSchema, userView } from './accounts.js';
import { LinkedAccountSchema, linkedAccountsOf, linkedAccountView } from './linked-accounts.js';
import { orgMembershipsOf } from './organizations.js';

/**
 * Admin user management (spec doc 1 §4.1, users and sessions): list, detail,
 * PATCH, DELETE, ban/unban, sessions list, session DELETE and impersonation. Every route
 * needs a principal with role `admin` (403 `forbidden` otherwise).
 */
const USER_ID = Type.String({ minLength: 1, maxLength: 128 });
const IdParams = Type.Object({ id: USER_ID });
const SessionParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 300 }) });

/** Users named in one sessions query. */
export const SESSIONS_QUERY_USERS_MAX = 50;
const ROLES: Role[] = ['user', 'admin'];

const UsersQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: USER_QUERY_MAX, pattern: '^[^\\u0000-\\u001f\\u007f]*$', description: 'Case-insensitive substring of e-mail, username or display name.' })),
  role: Type.Optional(Type.String({ maxLength: 64, description: 'user or admin; several separated by , or |.' })),
  banned: Type.Optional(Type.Boolean()),
  email_verified: Type.Optional(Type.Boolean()),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
});
const SessionsQuery = Type.Object({
  user_id: Type.Optional(Type.String({ maxLength: 4096, description: `Required: user ids separated by , or | (at most ${SESSIONS_QUERY_USERS_MAX}).` })),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
});

const PatchBody = Type.Object({
  display_name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  role: Type.Optional(Type.Union([Type.Literal('user'), Type.Literal('admin')])),
  email_verified: Type.Optional(Type.Boolean()),
  email: Type.Optional(Type.String({ format: 'email', maxLength: 254 })),
  username: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_.-]{3,32}$', description: '3 to 32 letters, digits, _ . -' })),
});
const BanBody = Type.Object({ reason: Type.String({ minLength: 1, maxLength: 500 }) });

const BanSchema = Type.Union([
  Type.Object({ reason: Type.String(), banned_at: Type.String({ format: 'date-time' }), banned_by: Type.String() }),
  Type.Null(),
]);
const UserDetailSchema = Type.Object(
  {
    user: UserSchema,
    active_session_count: Type.Integer(),
    api_key_count: Type.Integer({ description: 'API keys the user holds (revoked and expired ones included until deleted).' }),
    passkey_count: Type.Integer({ description: 'Always 0: passkeys are not offered.' }),
    identities: Type.Array(LinkedAccountSchema, { description: 'Linked external accounts (POST /api/v1/auth/account/link), oldest first.' }),
    org_memberships: Type.Array(Type.Object({ org_id: Type.String(), org_name: Type.String(), role: Type.String() }), {
      description: 'The organizations the user belongs to, with the role in each, in joining order.',
    }),
    ban: BanSchema,
  },
  { title: 'UserDetail' },
);
const SessionSchema = Type.Object(
  {
    id: Type.String(),
    user_id: Type.String(),
    active: Type.Boolean(),
    created_at: Type.String({ format: 'date-time' }),
    expires_at: Type.String({ format: 'date-time' }),
    ip_address: Type.String(),
    user_agent: Type.String(),
    impersonated_by: Type.Union([Type.String(), Type.Null()]),
  },
  { title: 'Session' },
);

export function requireAdmin(request: FastifyRequest): Principal {
  const principal = requirePrincipal(request);
  if (principal.role !== 'admin') throw new ServiceError('forbidden', 'This needs the admin role.');
  return principal;
}

/** `a,b|c` -> ['a','b','c'], trimmed, empty items dropped, duplicates removed. */
export function splitValues(value: string | undefined): string[] {
  if (value === undefined) return [];
  return [...new Set(value.split(/[,|]/).map((v) => v.trim()).filter((v) => v.length > 0))];
}

const ImpersonationTokensSchema = Type.Union(
  [
    Type.Object({
      user: UserSchema,
      access_token: Type.String(),
      refresh_token: Type.String(),
      token_type: Type.Literal('Bearer'),
      expires_in: Type.Integer({ description: 'Access token lifetime in seconds.' }),
      requires_2fa: Type.Literal(false),
    }),
    Type.Object({
      requires_2fa: Type.Literal(true),
      two_factor_token: Type.String({ description: 'Complete with the target user\'s code at POST /api/v1/auth/2fa/verify.' }),
      user: UserSchema,
    }),
  ],
  { title: 'ImpersonationTokens' },
);

function clientOf(request: FastifyRequest): ClientInfo {
  const agent = request.headers['user-agent'];
  return { ip_address: request.ip, user_agent: typeof agent === 'string' ? agent.slice(0, 512) : '' };
}

function sessionOut(session: SessionView) {
  return {
    id: session.id,
    user_id: session.user_id,
    active: session.active,
    created_at: isoTime(session.created_at_ms)!,
    expires_at: isoTime(session.expires_at_ms)!,
    ip_address: session.ip_address,
    user_agent: session.user_agent,
    impersonated_by: session.impersonated_by,
  };
}

function paging(query: { page?: number; page_size?: number }) {
  return { page: Math.max(1, query.page ?? 1), page_size: Math.min(100, query.page_size || 20) };
}

const adminErrors = (...extra: number[]) => errorResponses(...bearerErrors, 403, ...extra);

export function adminRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const { actors } = services;
  // Changes of a user are one ask of its actor, answered once the directory (the list) shows them.
  const askUser = <T>(id: string, message: UserMessage) => actors.ask<T>(USER_KIND, id, message);

  app.get<{ Querystring: Static<typeof UsersQuery> }>('/admin/auth/users', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Users, oldest first, filtered by q, role, banned and email_verified.',
      security: bearerSecurity,
      querystring: UsersQuery,
      response: { 200: Type.Object({ pagination: Pagination, users: Type.Array(UserSchema) }), ...adminErrors() },
    },
  }, async (request) => {
    requireAdmin(request);
    const query = request.query;
    const roles = splitValues(query.role);
    for (const role of roles) {
      if (!ROLES.includes(role as Role)) {
        throw new ServiceError('BAD_REQUEST', 'Unknown role.', { details: [{ field: 'role', message: 'Each role must be user or admin.' }] });
      }
    }
    const { page, page_size } = paging(query);
    const list: UserListQuery = { q: query.q, roles: roles as Role[], banned: query.banned, email_verified: query.email_verified, page, page_size };
    const view = await actors.ask<{ total: number; users: PublicUser[] }>(DIRECTORY_KIND, DIRECTORY_KEY, { op: 'list', ...list }, { readOnly: true });
    return {
      pagination: { page, page_size, total: view.total, has_more: page * page_size < view.total },
      users: view.users.map(userView),
    };
  });

  app.get<{ Params: Static<typeof IdParams> }>('/admin/auth/users/:id', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'One user with session count and ban.',
      security: bearerSecurity,
      params: IdParams,
      response: { 200: UserDetailSchema, ...adminErrors(404) },
    },
  }, async (request) => {
    requireAdmin(request);
    // A gather of reads from the user, its API key index, its linked accounts and its organizations.
    const detail = await actors.ask<{ user: PublicUser; active_session_count: number; ban: BanRecord | null }>(USER_KIND, request.params.id, { op: 'admin-detail' }, { readOnly: true });
    const keys = await actors.ask<{ total: number }>(USER_API_KEYS_KIND, request.params.id, { op: 'count' }, { readOnly: true });
    return {
      user: userView(detail.user),
      active_session_count: detail.active_session_count,
      api_key_count: keys.total,
      passkey_count: 0,
      identities: (await linkedAccountsOf(actors, request.params.id)).map(linkedAccountView),
      org_memberships: await orgMembershipsOf(actors, request.params.id),
      ban: detail.ban ? { reason: detail.ban.reason, banned_at: isoTime(detail.ban.banned_at_ms)!, banned_by: detail.ban.banned_by } : null,
    };
  });

  app.patch<{ Params: Static<typeof IdParams>; Body: Static<typeof PatchBody> }>('/admin/auth/users/:id', {
    schema: {
      tags: ['admin'],
      summary: 'Change display_name, role, email_verified, email or username (all optional). A name in use by another user, or demoting yourself: 409.',
      security: bearerSecurity,
      params: IdParams,
      body: PatchBody,
      response: { 200: UserSchema, ...adminErrors(404, 409) },
    },
    onRequest: authenticate,
  }, async (request) => {
    const admin = requireAdmin(request);
    const id = request.params.id;
    const { display_name, role, email_verified, email, username } = request.body;
    if (role !== undefined && role !== 'admin' && id === admin.user_id) {
      throw new ServiceError('conflict', 'An admin cannot take the admin role from themselves (ask another admin).');
    }
    const patch: AdminPatch = {};
    if (display_name !== undefined) patch.display_name = display_name.trim();
    if (role !== undefined) patch.role = role;
    if (email_verified !== undefined) patch.email_verified = email_verified;
    if (email !== undefined) patch.email = email.trim();
    if (username !== undefined) patch.username = username.trim();
    if (patch.display_name === '') {
      throw new ServiceError('BAD_REQUEST', 'display_name is blank.', { details: [{ field: 'display_name', message: 'Must not be blank.' }] });
    }
    // The user actor reserves new names in the directory first (so two renames cannot take the
    // same name), applies the patch, and answers once the directory shows it.
    const result = await askUser<{ user: PublicUser }>(id, { op: 'admin-patch', patch });
    return userView(result.user);
  });

  app.delete<{ Params: Static<typeof IdParams> }>('/admin/auth/users/:id', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Delete a user: its sessions and tokens stop working at once and its e-mail and username are free again. Yourself: 409.',
      security: bearerSecurity,
      params: IdParams,
      response: { 200: MessageBody, ...adminErrors(404, 409) },
    },
  }, async (request) => {
    const admin = requireAdmin(request);
    if (admin.user_id === request.params.id) throw new ServiceError('conflict', 'An admin cannot delete their own account here.');
    await askUser(request.params.id, { op: 'admin-delete' });
    return { message: 'User deleted.' };
  });

  app.post<{ Params: Static<typeof IdParams>; Body: Static<typeof BanBody> }>('/admin/auth/users/:id/ban', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Ban a user: every access and refresh token of theirs stops working at once, and login is refused (403). Yourself: 409.',
      security: bearerSecurity,
      params: IdParams,
      body: BanBody,
      response: { 200: MessageBody, ...adminErrors(404, 409) },
    },
  }, async (request) => {
    const admin = requireAdmin(request);
    if (admin.user_id === request.params.id) throw new ServiceError('conflict', 'An admin cannot ban themselves.');
    const reason = request.body.reason.trim();
    if (!reason) throw new ServiceError('BAD_REQUEST', 'reason is blank.', { details: [{ field: 'reason', message: 'Must not be blank.' }] });
    const result = await askUser<{ changed: boolean }>(request.params.id, { op: 'ban', reason, banned_by: admin.user_id });
    return { message: result.changed ? 'User banned.' : 'User was already banned.' };
  });

  app.post<{ Params: Static<typeof IdParams> }>('/admin/auth/users/:id/unban', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Lift a ban: the user can log in again. Sessions the ban ended stay ended (the user signs in anew); API keys work again.',
      security: bearerSecurity,
      params: IdParams,
      response: { 200: MessageBody, ...adminErrors(404) },
    },
  }, async (request) => {
    requireAdmin(request);
    const result = await askUser<{ changed: boolean }>(request.params.id, { op: 'unban' });
    return { message: result.changed ? 'User unbanned.' : 'User was not banned.' };
  });

  const accounts = new Accounts(services);
  app.post<{ Params: Static<typeof IdParams> }>('/admin/auth/users/:id/impersonate', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Sign in as a user: a session (at most 1 h) recording impersonated_by. Target with two-factor: requires_2fa and a two_factor_token for /api/v1/auth/2fa/verify. Yourself: 409; another admin or a banned user: 403.',
      security: bearerSecurity,
      params: IdParams,
      response: { 200: ImpersonationTokensSchema, ...adminErrors(404, 409) },
    },
  }, async (request) => {
    const admin = requireAdmin(request);
    const id = request.params.id;
    if (admin.user_id === id) throw new ServiceError('conflict', 'An admin cannot impersonate themselves.');
    if (admin.session_id === '' || admin.credential !== 'access_token') {
      throw new ServiceError('forbidden', 'Impersonation needs an interactive session, not an API key.');
    }
    if (admin.impersonated_by) throw new ServiceError('impersonation_forbidden', 'An impersonation session cannot impersonate in turn.');
    // The user actor refuses another admin or a banned user, and opens a session or a two-factor challenge.
    const started = await accounts.impersonate(id, admin.user_id, clientOf(request));
    if (started.requires_2fa) return { requires_2fa: true as const, two_factor_token: started.two_factor_token, user: userView(started.user) };
    return { ...started.tokens, user: userView(started.tokens.user), requires_2fa: false as const };
  });

  app.get<{ Querystring: Static<typeof SessionsQuery> }>('/admin/auth/sessions', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'Sessions of the given users (user_id required), newest first, active and recently ended.',
      security: bearerSecurity,
      querystring: SessionsQuery,
      response: { 200: Type.Object({ pagination: Pagination, sessions: Type.Array(SessionSchema) }), ...adminErrors() },
    },
  }, async (request) => {
    requireAdmin(request);
    const ids = splitValues(request.query.user_id);
    if (ids.length === 0) {
      throw new ServiceError('BAD_REQUEST', 'user_id is required.', { details: [{ field: 'user_id', message: 'Give one or more user ids separated by , or |.' }] });
    }
    if (ids.length > SESSIONS_QUERY_USERS_MAX || ids.some((id) => id.length > 128)) {
      throw new ServiceError('BAD_REQUEST', 'Too many user ids.', {
        details: [{ field: 'user_id', message: `At most ${SESSIONS_QUERY_USERS_MAX} ids of up to 128 characters.` }],
      });
    }
    const lists = await Promise.all(
      ids.map((id) =>
        actors.ask<SessionView[]>(USER_KIND, id, { op: 'list-sessions' }, { readOnly: true }).catch((error: unknown) => {
          // An unknown or deleted user has no sessions.
          if (error instanceof ServiceError && error.code === 'not_found') return [] as SessionView[];
          throw error;
        }),
      ),
    );
    const all = lists.flat().sort((a, b) => b.created_at_ms - a.created_at_ms || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const { page, page_size } = paging(request.query);
    const start = (page - 1) * page_size;
    return {
      pagination: { page, page_size, total: all.length, has_more: page * page_size < all.length },
      sessions: all.slice(start, start + page_size).map(sessionOut),
    };
  });

  app.delete<{ Params: Static<typeof SessionParams> }>('/admin/auth/sessions/:id', {
    onRequest: authenticate,
    schema: {
      tags: ['admin'],
      summary: 'End a session: its access and refresh tokens stop working at once. Already ended: 200. Unknown: 404.',
      security: bearerSecurity,
      params: SessionParams,
      response: { 200: MessageBody, ...adminErrors(404) },
    },
  }, async (request) => {
    requireAdmin(request);
    const user_id = sessionUserId(request.params.id);
    if (!user_id) throw new ServiceError('not_found', 'No such session.');
    const result = await askUser<{ ended: boolean }>(user_id, { op: 'admin-end-session', session_id: request.params.id });
    return { message: result.ended ? 'Session ended.' : 'Session had already ended.' };
  });
}

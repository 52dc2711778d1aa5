import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError } from '../../runtime/index.js';
import {
  GRANT_TYPES,
  isValidChallenge,
  OAUTH_CLIENT_KIND,
  scopeSubset,
  type AuthMethod,
  type ClientView,
  type DeleteReply,
  type GrantType,
  type PkceMethod,
  type TokenGrant,
  type TokenRequest,
} from '../../actors/oauth/messages.js';
import { USER_KIND, type PublicUser } from '../../actors/accounts/messages.js';
import { Accounts } from '../auth/accounts.js';
import {
  CLIENT_ID_PATTERN,
  formatOAuthRefreshToken,
  parseOAuthRefreshToken,
  LOGIN_STATE_TTL_SECONDS,
  newClientId,
  newOAuthSecret,
  OAUTH_SCOPES,
  parseBasicAuth,
  parseScope,
  REDIRECT_URIS_MAX,
  redirectUriProblem,
} from '../auth/oauth.js';
import { hashSecret, oauthTokens, type OAuthLoginState } from '../auth/tokens.js';
import { bearerAuthentication, refuseImpersonation } from '../plugins/authenticate.js';
import { useErrorFormat } from '../plugins/error-handler.js';
import { bearerErrors, bearerSecurity, errorResponses, MessageBody } from '../schemas.js';
import type { AppServices } from '../services.js';
import { requireAdmin } from './admin.js';
import { publicBase } from '../public-base.js';

/**
 * OAuth 2.0 authorization server (spec doc 1 §4.3; docs/api/oauth.md):
 * dynamic client registration (RFC 7591), authorization code with PKCE
 * (RFC 6749 §4.1, RFC 7636), client credentials, refresh with rotation,
 * metadata (RFC 8414) and the JWKS. Clients live in `oauth-client` actors;
 * pending authorization requests are signed `login_state` tokens; codes are
 * stored hashed in the client's actor, single-use, 60 s.
 */
const AUTH_METHODS: AuthMethod[] = ['none', 'client_secret_basic', 'client_secret_post'];

const RegisterBody = Type.Object({
  client_name: Type.Optional(Type.String({ maxLength: 200 })),
  redirect_uris: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { maxItems: REDIRECT_URIS_MAX })),
  grant_types: Type.Optional(Type.Array(Type.String(), { maxItems: 10 })),
  response_types: Type.Optional(Type.Array(Type.String(), { maxItems: 10 })),
  token_endpoint_auth_method: Type.Optional(Type.String()),
  scope: Type.Optional(Type.String({ maxLength: 1000 })),
});

const OAuthClient = Type.Object(
  {
    client_id: Type.String(),
    client_id_issued_at: Type.Integer(),
    client_name: Type.String(),
    grant_types: Type.Array(Type.String()),
    redirect_uris: Type.Array(Type.String()),
    response_types: Type.Array(Type.String()),
    token_endpoint_auth_method: Type.String(),
    scope: Type.String(),
    client_secret: Type.Optional(Type.String({ description: 'Confidential clients only; shown once, stored hashed.' })),
    client_secret_expires_at: Type.Optional(Type.Integer({ description: '0: the secret does not expire.' })),
  },
  { title: 'OAuthClient' },
);

const AuthorizeQuery = Type.Object({
  response_type: Type.Optional(Type.String()),
  client_id: Type.Optional(Type.String()),
  redirect_uri: Type.Optional(Type.String()),
  code_challenge: Type.Optional(Type.String()),
  code_challenge_method: Type.Optional(Type.String()),
  scope: Type.Optional(Type.String()),
  state: Type.Optional(Type.String({ maxLength: 1000 })),
});

const LoginStep = Type.Object({
  login_state: Type.String({ description: 'Opaque; send it to POST /oauth/authorize/complete once the user is logged in. Valid 10 minutes.' }),
  expires_in: Type.Integer(),
  client_id: Type.String(),
  client_name: Type.String(),
  scope: Type.String(),
});

const CompleteBody = Type.Object({ login_state: Type.String({ minLength: 1, maxLength: 8192 }) });
const ClientParams = Type.Object({ client_id: Type.String({ minLength: 1, maxLength: 128 }) });
/** Sessions ended at once while deleting a client (bounded: a client keeps at most CLIENT_SESSIONS_MAX). */
const SESSION_ENDS_IN_FLIGHT_MAX = 16;

const TokenForm = Type.Object({}, { additionalProperties: Type.String() });

const OAuthToken = Type.Object(
  {
    access_token: Type.String(),
    token_type: Type.String(),
    expires_in: Type.Integer(),
    scope: Type.String(),
    refresh_token: Type.Optional(Type.String()),
  },
  { title: 'OAuthToken' },
);
const OAuthErrorBody = Type.Object({ error: Type.String(), error_description: Type.String() }, { title: 'OAuthError' });

/** PUBLIC_BASE_URL (see http/config.ts); '' when unset. */
function configuredBaseUrl(services: AppServices): string {
  return services.config.publicBaseUrl;
}

/** Issuer and endpoint base: PUBLIC_BASE_URL when set, else the node's own URL (http/public-base.ts), never the Host header. */
function baseUrl(request: FastifyRequest, _configured: string): string {
  return publicBase(request);
}

function badRequest(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field} ${message}.`, { details: [{ field, message }] });
}

function errorRedirect(redirect_uri: string, error: string, description: string, state: string | undefined, issuer: string): string {
  const url = new URL(redirect_uri);
  url.searchParams.set('error', error);
  url.searchParams.set('error_description', description);
  if (state !== undefined) url.searchParams.set('state', state);
  url.searchParams.set('iss', issuer);
  return url.toString();
}

export function oauthRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const publicBase = configuredBaseUrl(services);
  // Resolved per use: the routes are compiled before the node has loaded its signing key.
  const oauth = () => oauthTokens(services.tokens);
  const accounts = new Accounts(services);
  const client = <T>(client_id: string, message: unknown) => services.actors.ask<T>(OAUTH_CLIENT_KIND, client_id, message);

  /** The account exists and is not banned (a read of the user actor). */
  async function ownerIsLive(user_id: string): Promise<boolean> {
    try {
      const owner = await services.actors.ask<PublicUser>(USER_KIND, user_id, { op: 'get' }, { readOnly: true });
      return !owner.banned;
    } catch (error) {
      if (error instanceof ServiceError && error.code === 'not_found') return false;
      throw error;
    }
  }

  async function findClient(client_id: string | undefined): Promise<ClientView | null> {
    if (client_id === undefined || !CLIENT_ID_PATTERN.test(client_id)) return null;
    try {
      return await client<ClientView>(client_id, { op: 'get' });
    } catch (error) {
      if (error instanceof ServiceError && error.code === 'not_found') return null;
      throw error;
    }
  }

  app.post<{ Body: Static<typeof RegisterBody> }>('/oauth/register', {
    schema: {
      tags: ['oauth'],
      summary: 'Dynamic client registration (RFC 7591). Confidential clients get a client_secret, shown only here. A client with the client_credentials grant needs a user\'s bearer (its owner); other clients register without one.',
      // The bearer is optional: only the client_credentials grant needs it.
      security: [{}, ...bearerSecurity],
      body: RegisterBody,
      response: { 201: OAuthClient, ...errorResponses(400, 401, 403, 413, 415, 429, 503) },
    },
  }, async (request, reply) => {
    const body = request.body;
    const grant_types = [...new Set(body.grant_types ?? ['authorization_code'])];
    for (const grant of grant_types) {
      if (!GRANT_TYPES.includes(grant as GrantType)) throw badRequest('grant_types', `holds ${JSON.stringify(grant)}; supported: ${GRANT_TYPES.join(', ')}`);
    }
    const method = (body.token_endpoint_auth_method ?? 'client_secret_basic') as AuthMethod;
    if (!AUTH_METHODS.includes(method)) throw badRequest('token_endpoint_auth_method', `must be one of ${AUTH_METHODS.join(', ')}`);
    if (method === 'none' && grant_types.includes('client_credentials')) {
      throw badRequest('grant_types', 'may hold client_credentials only for a confidential client (token_endpoint_auth_method other than none)');
    }
    const usesCode = grant_types.includes('authorization_code');
    const response_types = [...new Set(body.response_types ?? (usesCode ? ['code'] : []))];
    if (response_types.some((type) => type !== 'code') || response_types.includes('code') !== usesCode) {
      throw badRequest('response_types', usesCode ? 'must be ["code"] with the authorization_code grant' : 'must be empty without the authorization_code grant');
    }
    const redirect_uris = [...new Set(body.redirect_uris ?? [])];
    redirect_uris.forEach((uri, index) => {
      const problem = redirectUriProblem(uri);
      if (problem) throw badRequest(`redirect_uris.${index}`, problem);
    });
    if (usesCode && redirect_uris.length === 0) throw badRequest('redirect_uris', 'must hold at least one URI with the authorization_code grant');
    const scope = body.scope === undefined ? [...OAUTH_SCOPES] : parseScope(body.scope);
    const unknown = scope.find((item) => !OAUTH_SCOPES.includes(item));
    if (unknown !== undefined) throw badRequest('scope', `holds unknown scope ${JSON.stringify(unknown)}; known: ${OAUTH_SCOPES.join(' ')}`);
    // A client_credentials client gets tokens of its own (a tenant of its own,
    // no user consent): only a signed-in user may create one, and owns it.
    let owner_user_id: string | null = null;
    if (grant_types.includes('client_credentials')) {
      await authenticate(request, reply);
      const principal = refuseImpersonation(request);
      if (principal.credential !== 'access_token' || principal.session_id === '') {
        throw new ServiceError('forbidden', 'Registering a client_credentials client needs a logged-in user (a session access token), not an API key.');
      }
      owner_user_id = principal.user_id;
    }
    const client_secret = method === 'none' ? null : newOAuthSecret();
    const view = await client<ClientView>(newClientId(), {
      op: 'register',
      client: {
        owner_user_id,
        client_name: body.client_name?.trim() || 'Unnamed client',
        redirect_uris,
        grant_types: grant_types as GrantType[],
        response_types,
        token_endpoint_auth_method: method,
        scope,
        secret_hash: client_secret === null ? null : hashSecret(client_secret),
      },
    });
    reply.code(201);
    return {
      ...view,
      scope: view.scope.join(' '),
      ...(client_secret === null ? {} : { client_secret, client_secret_expires_at: 0 }),
    };
  });

  app.get<{ Querystring: Static<typeof AuthorizeQuery> }>('/oauth/authorize', {
    schema: {
      tags: ['oauth'],
      summary: 'Start an authorization code request. Valid: 200 with login_state. Bad client or redirect_uri: 400. Other errors: 302 to redirect_uri with error.',
      querystring: AuthorizeQuery,
      response: {
        200: LoginStep,
        302: Type.Null({ description: 'Redirect to the client with error, error_description, state and iss (RFC 6749 §4.1.2.1).' }),
        ...errorResponses(400, 429, 503),
      },
    },
  }, async (request, reply) => {
    const q = request.query;
    const found = await findClient(q.client_id);
    if (!found) throw badRequest('client_id', 'does not name a registered client');
    if (q.redirect_uri !== undefined && !found.redirect_uris.includes(q.redirect_uri)) {
      throw badRequest('redirect_uri', 'is not registered for this client (exact match)');
    }
    if (q.redirect_uri === undefined && found.redirect_uris.length !== 1) {
      throw badRequest('redirect_uri', 'is required when the client registered more than one');
    }
    const redirect_uri = q.redirect_uri ?? found.redirect_uris[0];
    const issuer = baseUrl(request, publicBase);
    const fail = (error: string, description: string) =>
      reply.code(302).header('location', errorRedirect(redirect_uri, error, description, q.state, issuer)).send();

    if (q.response_type !== 'code') return fail('unsupported_response_type', 'response_type must be code.');
    if (!found.grant_types.includes('authorization_code')) return fail('unauthorized_client', 'This client may not use the authorization_code grant.');
    const isPublic = found.token_endpoint_auth_method === 'none';
    if (q.code_challenge === undefined) return fail('invalid_request', 'code_challenge is required (PKCE, RFC 7636).');
    const method = (q.code_challenge_method ?? 'plain') as PkceMethod;
    if (method !== 'S256' && method !== 'plain') return fail('invalid_request', 'code_challenge_method must be S256 or plain.');
    if (method === 'plain' && isPublic) return fail('invalid_request', 'Public clients must use code_challenge_method S256.');
    if (!isValidChallenge(q.code_challenge)) return fail('invalid_request', 'code_challenge must be 43 to 128 characters of [A-Za-z0-9-._~].');
    const requested = q.scope === undefined ? found.scope : parseScope(q.scope);
    if (!scopeSubset(requested, found.scope)) return fail('invalid_scope', 'The requested scope exceeds the scope registered for this client.');

    const pending: OAuthLoginState = {
      client_id: found.client_id,
      redirect_uri,
      redirect_uri_given: q.redirect_uri !== undefined,
      code_challenge: q.code_challenge,
      code_challenge_method: method,
      scope: requested,
      state: q.state ?? null,
    };
    return {
      login_state: await oauth().signLoginState(pending, LOGIN_STATE_TTL_SECONDS),
      expires_in: LOGIN_STATE_TTL_SECONDS,
      client_id: found.client_id,
      client_name: found.client_name,
      scope: requested.join(' '),
    };
  });

  app.post<{ Body: Static<typeof CompleteBody> }>('/oauth/authorize/complete', {
    onRequest: authenticate,
    // redirect_to carries the authorization code, a credential: an Idempotency-Key replay must not store or repeat it.
    config: { secretResponse: true },
    schema: {
      tags: ['oauth'],
      summary: 'The logged-in user approves a pending authorization request: returns redirect_to with code, state and iss.',
      security: bearerSecurity,
      body: CompleteBody,
      response: { 200: Type.Object({ redirect_to: Type.String() }), ...errorResponses(...bearerErrors, 403, 409) },
    },
  }, async (request) => {
    // The code opens an ordinary session: an impersonation may not approve one.
    const principal = refuseImpersonation(request);
    if (principal.credential !== 'access_token' || principal.session_id === '') {
      throw new ServiceError('forbidden', 'Only a logged-in user (a session access token) can complete an authorization request.');
    }
    const pending = await oauth().verifyLoginState(request.body.login_state);
    if (!pending) throw badRequest('login_state', 'is invalid or expired');
    const code = newOAuthSecret();
    try {
      await client(pending.client_id, {
        op: 'issue-code',
        code_hash: hashSecret(code),
        user_id: principal.user_id,
        redirect_uri: pending.redirect_uri,
        redirect_uri_given: pending.redirect_uri_given,
        code_challenge: pending.code_challenge,
        code_challenge_method: pending.code_challenge_method,
        scope: pending.scope,
      });
    } catch (error) {
      // The client was deleted or changed since the request started.
      if (error instanceof ServiceError && (error.code === 'not_found' || error.code === 'BAD_REQUEST')) throw badRequest('login_state', 'names a client or redirect_uri that is no longer registered');
      throw error;
    }
    const url = new URL(pending.redirect_uri);
    url.searchParams.set('code', code);
    if (pending.state !== null) url.searchParams.set('state', pending.state);
    url.searchParams.set('iss', baseUrl(request, publicBase));
    return { redirect_to: url.toString() };
  });

  app.delete<{ Params: Static<typeof ClientParams> }>('/admin/oauth/clients/:client_id', {
    onRequest: authenticate,
    schema: {
      tags: ['oauth', 'admin'],
      summary: 'Delete an OAuth client (platform admin): its client_credentials tokens, codes and refresh tokens stop working at once, and the user sessions opened through it end.',
      security: bearerSecurity,
      params: ClientParams,
      response: { 200: MessageBody, ...errorResponses(...bearerErrors, 403, 404) },
    },
  }, async (request) => {
    const admin = requireAdmin(request);
    const { client_id } = request.params;
    if (!CLIENT_ID_PATTERN.test(client_id)) throw new ServiceError('not_found', 'No such OAuth client.');
    const deleted = await client<DeleteReply>(client_id, { op: 'delete', deleted_by: admin.user_id });
    // The binding records are gone with the client, so a failure here is not
    // retried: such a session keeps its current access token until it expires
    // (ACCESS_TOKEN_TTL_SECONDS) and can no longer be refreshed.
    let ended = 0;
    const queue = [...deleted.sessions];
    const worker = async () => {
      for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
        try {
          await accounts.endSession(next.user_id, next.session_id);
          ended++;
        } catch (error) {
          request.log.warn({ err: error, client_id, session_id: next.session_id }, 'ending a session of a deleted OAuth client failed');
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(SESSION_ENDS_IN_FLIGHT_MAX, queue.length) }, worker));
    return { message: `OAuth client deleted; ${ended} session${ended === 1 ? '' : 's'} ended.` };
  });

  app.get('/.well-known/oauth-authorization-server', {
    schema: {
      tags: ['oauth'],
      summary: 'Authorization server metadata (RFC 8414).',
      response: { 200: Type.Object({}, { additionalProperties: true }) },
    },
  }, async (request) => {
    const base = baseUrl(request, publicBase);
    return {
      issuer: base,
      authorization_endpoint: `${base}/oauth/authorize`,
      token_endpoint: `${base}/oauth/token`,
      registration_endpoint: `${base}/oauth/register`,
      jwks_uri: `${base}/.well-known/jwks.json`,
      scopes_supported: [...OAUTH_SCOPES],
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: GRANT_TYPES,
      token_endpoint_auth_methods_supported: AUTH_METHODS,
      code_challenge_methods_supported: ['S256', 'plain'],
      authorization_response_iss_parameter_supported: true,
    };
  });

  app.get('/.well-known/jwks.json', {
    schema: {
      tags: ['oauth'],
      summary: 'The public key that signs access tokens (JWK Set, Ed25519).',
      response: { 200: Type.Object({ keys: Type.Array(Type.Object({}, { additionalProperties: true })) }) },
    },
  }, async () => ({ keys: [services.tokens.publicJwk] }));

  // The token endpoint: form-encoded body and RFC 6749 §5.2 errors (the error handler's 'oauth' format), in a scope of its own.
  void app.register(async (scope) => {
    useErrorFormat(scope, 'oauth');
    scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
      const form: Record<string, string> = {};
      const seen = new Set<string>();
      for (const [name, value] of new URLSearchParams(body as string)) {
        if (seen.has(name)) {
          done(new ServiceError('oauth_invalid_request', `Parameter ${name} is repeated.`), undefined);
          return;
        }
        seen.add(name);
        form[name] = value;
      }
      done(null, form);
    });

    scope.post<{ Body: Record<string, string> }>('/oauth/token', {
      schema: {
        tags: ['oauth'],
        summary: 'Token endpoint (application/x-www-form-urlencoded): authorization_code with PKCE, refresh_token, client_credentials.',
        consumes: ['application/x-www-form-urlencoded'],
        body: TokenForm,
        response: { 200: OAuthToken, 400: OAuthErrorBody, 401: OAuthErrorBody, 413: OAuthErrorBody, 429: OAuthErrorBody, 503: OAuthErrorBody },
      },
    }, async (request, reply) => {
      reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
      if (!/^application\/x-www-form-urlencoded\s*(;|$)/i.test(request.headers['content-type'] ?? '')) {
        throw new ServiceError('oauth_invalid_request', 'The body must be application/x-www-form-urlencoded.');
      }
      const form = request.body ?? {};
      const { client_id, ...authentication } = clientAuthentication(request, form);
      // Secrets are drawn here; the client actor decides every rule and keeps only their hashes.
      const refresh = newOAuthSecret();
      const sessionRefresh = newOAuthSecret();
      const present = (name: string) => (form[name] === undefined || form[name] === '' ? undefined : form[name]);
      const code = present('code');
      const presentedRefresh = present('refresh_token');
      const parsedRefresh = presentedRefresh === undefined ? undefined : parseOAuthRefreshToken(presentedRefresh);
      const agent = request.headers['user-agent'];
      const granted = await client<TokenGrant>(client_id, {
        op: 'token',
        ...authentication,
        grant_type: form.grant_type,
        code_hash: code === undefined ? undefined : hashSecret(code),
        redirect_uri: present('redirect_uri'),
        code_verifier: present('code_verifier'),
        refresh_token: parsedRefresh === undefined ? undefined : parsedRefresh && { client_id: parsedRefresh.client_id, session_id: parsedRefresh.session_id, presented_hash: hashSecret(parsedRefresh.secret) },
        scope: form.scope === undefined ? undefined : parseScope(form.scope),
        new_refresh_hash: hashSecret(refresh),
        new_session_refresh_hash: hashSecret(sessionRefresh),
        session: { ttl_seconds: services.config.refreshTokenTtlSeconds, ip_address: request.ip, user_agent: typeof agent === 'string' ? agent.slice(0, 512) : '' },
      } satisfies TokenRequest);
      if (granted.grant === 'client_credentials') {
        // A client its owner registered works only while the owner's account does: banned, deleted or
        // deprovisioned, it gets no new token (one already issued runs out within its lifetime).
        if (granted.owner_user_id !== null && !(await ownerIsLive(granted.owner_user_id))) {
          throw new ServiceError('oauth_invalid_client', 'The account that registered this client is banned or deleted.');
        }
        const access = await oauth().signClientAccessToken(granted.client_id, granted.scope);
        return { access_token: access.token, token_type: 'Bearer', expires_in: access.expires_in, scope: granted.scope.join(' ') };
      }
      // An access token of the session carrying the granted scope, and the client's refresh token when it has that grant.
      const access = await oauth().signUserAccessToken(granted.user_id, granted.session_id, granted.scope);
      return {
        access_token: access.token,
        token_type: 'Bearer',
        expires_in: access.expires_in,
        scope: granted.scope.join(' '),
        ...(granted.refresh ? { refresh_token: formatOAuthRefreshToken(granted.client_id, granted.session_id, refresh) } : {}),
      };
    });
  });

  /**
   * Which client the request names and how it authenticates (RFC 6749 §2.3):
   * the request's own shape only; the client actor checks the secret and the
   * registered method (every failure there is the same 401 invalid_client).
   */
  function clientAuthentication(request: FastifyRequest, form: Record<string, string>): { client_id: string; auth_method: AuthMethod; secret_hash: string | null } {
    const basic = parseBasicAuth(request.headers.authorization);
    if (basic === 'malformed') throw new ServiceError('oauth_invalid_client', 'Client authentication failed.');
    if (basic && form.client_secret !== undefined) throw new ServiceError('oauth_invalid_request', 'Use one client authentication method, not two.');
    if (basic && form.client_id !== undefined && form.client_id !== basic.client_id) {
      throw new ServiceError('oauth_invalid_request', 'client_id in the body differs from the Authorization header.');
    }
    const client_id = basic ? basic.client_id : form.client_id;
    if (client_id === undefined) throw new ServiceError('oauth_invalid_client', 'Client authentication failed: no client_id.');
    const auth_method: AuthMethod = basic ? 'client_secret_basic' : form.client_secret !== undefined ? 'client_secret_post' : 'none';
    const secret = basic ? basic.client_secret : form.client_secret;
    if (!CLIENT_ID_PATTERN.test(client_id)) throw new ServiceError('oauth_invalid_client', 'Client authentication failed.');
    return { client_id, auth_method, secret_hash: secret === undefined ? null : hashSecret(secret) };
  }
}

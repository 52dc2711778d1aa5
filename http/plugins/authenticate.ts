import type { FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../../runtime/index.js';
import { USER_KIND } from '../../actors/accounts/messages.js';
import { type PublicUser, type SessionPrincipal } from '../../actors/accounts/messages.js';
import { looksLikeApiKey, parseApiKey, requiredScope, scopeAllows } from '../auth/api-keys.js';
import type { Principal } from '../auth/principal.js';
import { CLIENT_SUBJECT_PREFIX, oauthTokens, type AccessClaims } from '../auth/tokens.js';
import { OAUTH_CLIENT_KIND } from '../../actors/oauth/messages.js';
import { ORGANIZATION_KIND } from '../../actors/organizations/messages.js';
import type { AppServices } from '../services.js';
import { cachedSession, checkSession } from '../auth/session-check.js';
import { API_KEY_REJECTED, checkApiKey } from '../auth/api-key-check.js';
import { authenticateX402Session, isX402SessionToken } from '../x402-session.js';
import { routeUrlOf } from '../route-config.js';
import { bearerTokenOf } from '../auth/bearer-token.js';

/**
 * The onRequest hook of every B route. Checks the bearer token's signature
 * (cached), then whether its session is still live: from this node's session
 * cache, else by asking the user actor. Logout, bans and deletions drop the
 * cached checks on every node before they answer, so they cut access off at
 * once, everywhere (http/auth/revocation-aware-client.ts).
 *
 * A bearer starting with `pk_` is an API key: its actor checks the hash,
 * revocation and expiry, then the user actor confirms the owner exists and is
 * not banned (so a ban or a deleted user cuts every key off at once). A key
 * made for an organization acts for it (tenant = org_id) only while its user
 * is still a member: leaving, being removed or the organization's deletion
 * cuts it off at once. The key's scopes are then checked against the route
 * (see http/auth/api-keys.ts). While the key's or the owner's partition is
 * unavailable, the key check is answered from this node's last positive
 * check of it, made at most 60 s ago (http/auth/api-key-check.ts); a
 * revocation or deletion of the key, and a ban, deletion or role change of
 * its owner, drop that check on every node first.
 */
async function authenticateApiKey(services: AppServices, token: string, request: FastifyRequest): Promise<Principal> {
  const parsed = parseApiKey(token);
  if (!parsed) throw new ServiceError('unauthorized', API_KEY_REJECTED);
  // The key's and the owner's actors, asked on every request; while either partition is unavailable,
  // this node's last positive check of the key (api-key-check.ts).
  const { check, degraded } = await checkApiKey(services.actors, services.sessionCache, services.clock, parsed.api_key_id, parsed.key_hash);
  if (degraded) request.log.warn({ user_id: check.user_id, api_key_id: check.api_key_id }, "API key check answered from this node's last positive check: the key's or the user's partition is unavailable");
  // An organization's key: the membership is asked on every request, never answered from a fallback.
  if (check.org_id) {
    try {
      await services.actors.ask(ORGANIZATION_KIND, check.org_id, { op: 'get_member', user_id: check.user_id }, { readOnly: true });
    } catch (error) {
      if (error instanceof ServiceError && (error.code === 'unauthorized' || error.code === 'not_found')) {
        throw new ServiceError('unauthorized', API_KEY_REJECTED);
      }
      throw error;
    }
  }
  return {
    user_id: check.user_id,
    session_id: '',
    role: check.role,
    org_id: check.org_id,
    tenant: check.org_id ?? check.user_id,
    credential: 'api_key',
    scopes: check.scopes,
    api_key_id: check.api_key_id,
    impersonated_by: null,
  };
}
// --- OAuth client_credentials tokens (docs/api/oauth.md) -------------------
/**
 * A client_credentials access token names the client (`sub` = `client:<id>`),
 * not a user. Its principal acts for the client itself: user_id and tenant are
 * `client:<id>`, scopes are those granted (a subset of the client's registered
 * scopes, enforced per route like an API key's), and every request asks the
 * client's actor that it still exists.
 */
function isClientAccessToken(services: AppServices, token: string): boolean {
  return oauthTokens(services.tokens).isClientAccessToken(token);
}

async function authenticateOAuthClient(services: AppServices, token: string, request: FastifyRequest): Promise<Principal> {
  const claims = await oauthTokens(services.tokens).verifyClientAccessToken(token);
  try {
    await services.actors.ask(OAUTH_CLIENT_KIND, claims.client_id, { op: 'get' }, { readOnly: true });
  } catch (error) {
    if (error instanceof ServiceError && error.code === 'not_found') throw new ServiceError('unauthorized', 'The access token is invalid or expired.');
    throw error;
  }
  const requirement = requiredScope(routeUrlOf(request) ?? request.url, request.method);
  if (!scopeAllows(claims.scopes, requirement)) {
    throw new ServiceError(
      'insufficient_scope',
      requirement.kind === 'scope' ? `This access token lacks the scope ${requirement.scope}.` : 'This endpoint does not accept client access tokens.',
    );
  }
  const subject = CLIENT_SUBJECT_PREFIX + claims.client_id;
  return {
    user_id: subject,
    session_id: '',
    role: 'user',
    org_id: null,
    tenant: subject,
    credential: 'access_token',
    scopes: claims.scopes,
    api_key_id: null,
    impersonated_by: null,
  };
}
// ---------------------------------------------------------------------------

/** Every hook made by bearerAuthentication: the API reference marks their routes with `bearerAuth` (http/api-reference/enrich.ts). */
const bearerHooks = new WeakSet<object>();

export function isBearerAuthentication(hook: unknown): boolean {
  return typeof hook === 'function' && bearerHooks.has(hook);
}

type HookDone = (error?: Error) => void;

/**
 * The bearer check, as an onRequest hook or called by hand. Fastify calls it
 * with (request, reply, done): a request whose token and session checks are
 * both in this node's caches (nearly every request) is authenticated there
 * and then, with no promise and no turn of the microtask queue; any other
 * goes on asynchronously and calls done when settled. Called with two
 * arguments, it returns a promise to await.
 */
export interface BearerAuthentication {
  (request: FastifyRequest, reply: FastifyReply): Promise<void>;
  (request: FastifyRequest, reply: FastifyReply, done: HookDone): void;
}

export function bearerAuthentication(services: AppServices): BearerAuthentication {
  function authenticate(request: FastifyRequest, _reply: FastifyReply, done?: HookDone): Promise<void> | void {
    if (done === undefined) return authenticateAsync(request);
    let principal: Principal | undefined;
    try {
      principal = principalFromCaches(request);
    } catch (error) {
      done(error as Error);
      return;
    }
    if (principal !== undefined) {
      request.principal = principal;
      done();
      return;
    }
    authenticateAsync(request).then(() => done(), done);
  }
  bearerHooks.add(authenticate);
  return authenticate as BearerAuthentication;

  /**
   * The principal of an access token whose signature and session this node
   * has checked recently; undefined when anything is not in the caches (an API
   * key, a client or payment-session token, an unverified or impersonation
   * token): then authenticateAsync decides. Throws what it would throw.
   */
  function principalFromCaches(request: FastifyRequest): Principal | undefined {
    const token = bearerTokenOf(request);
    if (looksLikeApiKey(token) || isX402SessionToken(token) || isClientAccessToken(services, token)) return undefined;
    const claims = services.tokens.verifiedClaims(token);
    if (claims === undefined) return undefined;
    requireGrantedScope(request, claims);
    const session = cachedSession(services.sessionCache, services.clock, claims.sub, claims.sid);
    if (session === undefined || session.impersonated_by) return undefined;
    return sessionPrincipal(session, claims);
  }

  async function authenticateAsync(request: FastifyRequest): Promise<void> {
    const token = bearerTokenOf(request);
    if (looksLikeApiKey(token)) {
      const principal = await authenticateApiKey(services, token, request);
      const requirement = requiredScope(routeUrlOf(request) ?? request.url, request.method);
      if (!scopeAllows(principal.scopes, requirement)) {
        throw new ServiceError(
          'insufficient_scope',
          requirement.kind === 'scope'
            ? `This API key lacks the scope ${requirement.scope}.`
            : requirement.kind === 'wildcard'
              ? 'This endpoint needs an API key with the * scope.'
              : 'This endpoint does not accept API keys; use an access token.',
        );
      }
      request.principal = principal;
      return;
    }
    // A payment session token (POST /x402/session): accepted by x402 endpoints and priced routes only.
    if (isX402SessionToken(token)) {
      request.principal = await authenticateX402Session(services, token, request);
      return;
    }
    if (isClientAccessToken(services, token)) {
      request.principal = await authenticateOAuthClient(services, token, request);
      return;
    }
    const claims = services.tokens.verifiedClaims(token) ?? (await services.tokens.verifyAccessToken(token));
    requireGrantedScope(request, claims);
    // The session check: from this node's cache, else from the user actor (then cached), else, while
    // the user's partition is unavailable, from this node's last positive check (session-check.ts).
    const fresh = cachedSession(services.sessionCache, services.clock, claims.sub, claims.sid);
    const { session, degraded } = fresh ? { session: fresh, degraded: false } : await checkSession(services.actors, services.sessionCache, services.clock, claims.sub, claims.sid);
    if (degraded) request.log.warn({ user_id: session.user_id }, "session check answered from this node's last positive check: the user's partition is unavailable");
    // An impersonation session lives only while its admin is a live admin.
    // The cache never keeps impersonation sessions (see SessionCache.put), so
    // this check runs on every request with such a token.
    if (session.impersonated_by) await requireLiveAdmin(services, session.impersonated_by);
    request.principal = sessionPrincipal(session, claims);
  }
}

/**
 * OAuth user tokens carry the scope granted to the client: enforced like an
 * API key's. Logout is the one credential route they may call: it ends the
 * grant's own session.
 */
function requireGrantedScope(request: FastifyRequest, claims: AccessClaims): void {
  if (claims.scopes && !scopeAllows(claims.scopes, requiredScope(routeUrlOf(request) ?? request.url, request.method)) && !isLogout(request)) {
    throw new ServiceError('insufficient_scope', 'This OAuth access token was not granted the scope this endpoint needs.');
  }
}

function sessionPrincipal(session: SessionPrincipal, claims: AccessClaims): Principal {
  return {
    user_id: session.user_id,
    session_id: session.session_id,
    // An impersonation acts as a user, never as an admin: admins cannot be impersonated, and a target made admin
    // since must not lend the impersonating admin a second admin identity (docs/api/admin.md).
    role: session.impersonated_by ? 'user' : session.role,
    org_id: null,
    tenant: session.user_id,
    credential: 'access_token',
    scopes: claims.scopes ?? ['*'],
    api_key_id: null,
    impersonated_by: session.impersonated_by ?? null,
  };
}

function isLogout(request: FastifyRequest): boolean {
  return request.method === 'POST' && routeUrlOf(request) === '/api/v1/auth/logout';
}

/** The admin behind an impersonation session still exists, is not banned and still has the admin role; otherwise 401. */
async function requireLiveAdmin(services: AppServices, admin_id: string): Promise<void> {
  let admin: PublicUser;
  try {
    admin = await services.actors.ask<PublicUser>(USER_KIND, admin_id, { op: 'get' }, { readOnly: true });
  } catch (error) {
    if (error instanceof ServiceError && error.code === 'not_found') throw new ServiceError('unauthorized', 'The access token is no longer valid.');
    throw error;
  }
  if (admin.banned || admin.role !== 'admin') throw new ServiceError('unauthorized', 'The access token is no longer valid.');
}

/**
 * The principal, unless it is an impersonation session: routes that create or
 * change credentials (API keys, two-factor, OAuth and CLI approvals, linked
 * accounts, SCIM tokens, ...) call this first, so an admin impersonating a user
 * cannot leave behind a credential that outlives the one-hour, audited
 * impersonation session (docs/api/admin.md). 403 `impersonation_forbidden`.
 */
export function refuseImpersonation(request: FastifyRequest): Principal {
  const principal = requirePrincipal(request);
  if (principal.impersonated_by) {
    throw new ServiceError('impersonation_forbidden', 'An impersonation session cannot create or change credentials; the user must do this in their own session.');
  }
  return principal;
}

export function requirePrincipal(request: FastifyRequest): Principal {
  if (!request.principal) throw new ServiceError('unauthorized', 'Authentication required.');
  return request.principal;
}

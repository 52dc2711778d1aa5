import type { FastifyRequest } from 'fastify';
import { SignJWT } from 'jose';
import { ServiceError } from '../runtime/index.js';
import type { Principal } from './auth/principal.js';
import { checkSession } from './auth/session-check.js';
import type { AppServices } from './services.js';
import { routeUrlOf } from './route-config.js';

/**
 * Payment session tokens (`POST /x402/session`): `x402s.` followed by an
 * EdDSA JWT (typ `x402s+jwt`) signed with the node's token key, valid for
 * X402_SESSION_TTL_SECONDS. `sub` is the paying principal: a payer proven by
 * an x402 payment (`x402:<network>:<address>`), or an authenticated user
 * (then `sid` names the user's session, checked on every use, so logging out
 * or a ban ends the payment session too).
 *
 * A payment session is a payment credential, not a general one: it is
 * accepted by the x402 endpoints (balance, top-up, quote) and by routes that
 * are priced while enforcement is on; anywhere else it gets 403
 * insufficient_scope. Its principal's tenant is the payer, so a payer's
 * resources on priced routes are its own.
 */
export const X402_SESSION_PREFIX = 'x402s.';
const TYP = 'x402s+jwt';

export function isX402SessionToken(token: string): boolean {
  return token.startsWith(X402_SESSION_PREFIX);
}

export interface SessionSubject {
  /** The paying principal (balance key and tenant). */
  principal: string;
  /** Set when the principal is a user: the session the payment session depends on. */
  user?: { user_id: string; session_id: string };
}

export async function signX402Session(services: AppServices, subject: SessionSubject): Promise<{ token: string; expires_in: number }> {
  const keys = services.tokens.oauthKeyAccess();
  const now_s = Math.floor(keys.now() / 1000);
  const ttl = services.config.x402SessionTtlSeconds;
  const claims = subject.user ? { uid: subject.user.user_id, sid: subject.user.session_id } : {};
  const jwt = await keys.sign(
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'EdDSA', kid: services.tokens.kid, typ: TYP })
      .setSubject(subject.principal)
      .setIssuedAt(now_s)
      .setExpirationTime(now_s + ttl),
  );
  return { token: X402_SESSION_PREFIX + jwt, expires_in: ttl };
}

/** Marks a request the x402 edge found priced (http/plugins/x402.ts): a payment session may call it. */
export const PRICED_ROUTE = Symbol('x402 priced route');

function acceptsPaymentSession(request: FastifyRequest): boolean {
  const url = routeUrlOf(request) ?? '';
  if (url.startsWith('/api/v1/x402/') || url.startsWith('/x402/')) return true;
  return (request as unknown as Record<symbol, unknown>)[PRICED_ROUTE] === true;
}

/** The principal of a payment session token (authenticate.ts calls this for `x402s.` bearers), or 401/403. */
export async function authenticateX402Session(services: AppServices, token: string, request: FastifyRequest): Promise<Principal> {
  let payload: Record<string, unknown>;
  try {
    payload = await services.tokens.oauthKeyAccess().verify(token.slice(X402_SESSION_PREFIX.length), TYP);
  } catch {
    throw new ServiceError('unauthorized', 'The payment session token is invalid or expired.');
  }
  if (typeof payload.sub !== 'string') throw new ServiceError('unauthorized', 'The payment session token is invalid or expired.');
  if (!acceptsPaymentSession(request)) {
    throw new ServiceError('insufficient_scope', 'A payment session token is accepted only by the x402 endpoints and by priced routes.');
  }
  const principal: Principal = {
    user_id: payload.sub,
    session_id: '',
    role: 'user',
    org_id: null,
    tenant: payload.sub,
    credential: 'access_token',
    scopes: ['x402'],
    api_key_id: null,
    impersonated_by: null,
  };
  if (typeof payload.uid === 'string' && typeof payload.sid === 'string') {
    // A user's payment session lives only as long as the user's session (logout, ban).
    const { session } = await checkSession(services.actors, services.sessionCache, services.clock, payload.uid, payload.sid);
    principal.user_id = session.user_id;
    principal.session_id = session.session_id;
    principal.impersonated_by = session.impersonated_by ?? null;
  }
  return principal;
}

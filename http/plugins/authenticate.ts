import type { FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '../../runtime/index.js';
import { USER_KIND } from '../../actors/account/actor.js';
import type { SessionPrincipal } from '../../actors/account/user-state.js';
import type { Principal } from '../auth/principal.js';
import type { AppServices } from '../services.js';

/**
 * The onRequest hook of every B route. Checks the bearer token's signature
 * (cached), then asks the user actor whether its session is still live, so
 * logout and bans cut access off at once, on every node.
 */
export function bearerAuthentication(services: AppServices) {
  return async function authenticate(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
    const header = request.headers.authorization;
    if (typeof header !== 'string' || !/^Bearer\s+\S/i.test(header)) {
      throw new ServiceError('unauthorized', 'Missing bearer token: send Authorization: Bearer <token>.');
    }
    const token = header.slice(header.indexOf(' ') + 1).trim();
    if (token.length > 4096) throw new ServiceError('unauthorized', 'The access token is invalid or expired.');
    const claims = await services.tokens.verifyAccessToken(token);
    const session = await services.actors.ask<SessionPrincipal>(USER_KIND, claims.sub, { op: 'authenticate', session_id: claims.sid });
    const principal: Principal = {
      user_id: session.user_id,
      session_id: session.session_id,
      role: session.role,
      org_id: null,
      tenant: session.user_id,
    };
    request.principal = principal;
  };
}

export function requirePrincipal(request: FastifyRequest): Principal {
  if (!request.principal) throw new ServiceError('unauthorized', 'Authentication required.');
  return request.principal;
}

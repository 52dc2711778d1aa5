import type { FastifyRequest } from 'fastify';
import { ServiceError } from '../../runtime/index.js';

/** A connection's last Authorization header and the token read from it. */
interface LastBearer {
  header: string;
  token: string;
}

/**
 * Per connection, the last bearer header and the token string read from it.
 *
 * Why: a keep-alive client sends the same header on every request, and the
 * token is the key of the verified-token cache (http/auth/tokens.ts). A token
 * read afresh is a new string whose hash V8 computes on the cache lookup,
 * over all of its 200-odd characters: 7,300 instructions a request, 3% of a
 * lock acquisition's work on the event loop (callgrind, 2026-11-30). The
 * token string handed back here is the one looked up before, whose hash V8
 * keeps; telling that the header is the same is a compare of its bytes. The
 * memo holds strings only, never a verdict: every request still goes through
 * the same cache, expiry and session checks.
 */
const lastBearerOf = new WeakMap<object, LastBearer>();

/** The bearer token of the request, or a 401. */
export function bearerTokenOf(request: FastifyRequest): string {
  const header = request.headers.authorization;
  // A request made by hand (a bench, inject) may have no socket: then nothing is remembered.
  const socket = (request.raw as { socket?: object | null } | undefined)?.socket;
  const last = socket ? lastBearerOf.get(socket) : undefined;
  if (last !== undefined && last.header === header) return last.token;
  if (typeof header !== 'string' || !/^Bearer\s+\S/i.test(header)) {
    throw new ServiceError('unauthorized', 'Missing bearer token: send Authorization: Bearer <token>.');
  }
  const token = header.slice(header.indexOf(' ') + 1).trim();
  if (token.length > 4096) throw new ServiceError('unauthorized', 'The access token is invalid or expired.');
  if (socket) lastBearerOf.set(socket, { header, token });
  return token;
}

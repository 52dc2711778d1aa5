import { randomBytes } from 'node:crypto';
import { API_KEY_SCOPES } from './api-keys.js';

/**
 * OAuth 2.0 helpers for http/routes/oauth.ts: redirect URI and scope rules,
 * client secrets and codes (random at the edge, only sha256 stored). The
 * token endpoint's errors are the registry's `oauth_*` codes, rendered in
 * RFC 6749 §5.2's shape by http/plugins/error-handler.ts.
 */

/** Scopes a client may register and be granted: the API key catalog without `*`. */
export const OAUTH_SCOPES: readonly string[] = API_KEY_SCOPES.filter((scope) => scope !== '*');
/** Scopes that only make sense for a user: never granted to a client_credentials token. */
export const USER_ONLY_SCOPES: readonly string[] = ['auth:read'];

export const CLIENT_ID_PATTERN = /^oc_[0-9a-f]{32}$/;
export const REDIRECT_URIS_MAX = 10;
export const REDIRECT_URI_LENGTH_MAX = 2000;
/** How long a `login_state` (a pending authorization request) stays valid. */
export const LOGIN_STATE_TTL_SECONDS = 600;

export function newClientId(): string {
  return `oc_${randomBytes(16).toString('hex')}`;
}

/** 32 random bytes, base64url: a client secret or an authorization code. */
export function newOAuthSecret(): string {
  return randomBytes(32).toString('base64url');
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/** Why a redirect URI is refused, or null: https anywhere, http on loopback only, no fragment, no credentials. */
export function redirectUriProblem(uri: string): string | null {
  if (uri.length > REDIRECT_URI_LENGTH_MAX) return `is longer than ${REDIRECT_URI_LENGTH_MAX} characters`;
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return 'is not an absolute URL';
  }
  // WHATWG URL reads `https:///cb` as host `cb`; the URI must name its host itself (RFC 3986 authority).
  if (!/^[a-z][a-z0-9+.-]*:\/\/[^/?#\\]/i.test(uri)) return 'must name its host (scheme://host/...)';
  if (url.hash !== '' || uri.includes('#')) return 'must not have a fragment';
  if (url.username !== '' || url.password !== '') return 'must not carry credentials';
  if (url.protocol === 'https:') return null;
  if (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname)) return null;
  return 'must be https, or http on a loopback host (127.0.0.1, [::1], localhost)';
}

/** A space-separated scope parameter as a list (empty entries dropped, duplicates removed). */
export function parseScope(scope: string | undefined): string[] {
  if (scope === undefined) return [];
  return [...new Set(scope.split(' ').filter((item) => item !== ''))];
}

/** `Authorization: Basic` credentials (RFC 6749 §2.3.1: both parts form-urlencoded), or null when absent or malformed. */
export function parseBasicAuth(header: string | undefined): { client_id: string; client_secret: string } | null | 'malformed' {
  if (header === undefined) return null;
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (!match) return 'malformed';
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return 'malformed';
  try {
    const formDecode = (part: string) => decodeURIComponent(part.replace(/\+/g, ' '));
    return { client_id: formDecode(decoded.slice(0, colon)), client_secret: formDecode(decoded.slice(colon + 1)) };
  } catch {
    return 'malformed';
  }
}

/** The refresh token a client holds: `ort.<client_id>.<session_id>.<secret>`; only sha256(secret) is stored. */
export function formatOAuthRefreshToken(client_id: string, session_id: string, secret: string): string {
  return `ort.${client_id}.${session_id}.${secret}`;
}

export function parseOAuthRefreshToken(token: string): { client_id: string; session_id: string; secret: string } | null {
  const parts = token.split('.');
  if (parts.length !== 4 || parts[0] !== 'ort' || !CLIENT_ID_PATTERN.test(parts[1]) || parts.some((part) => part.length === 0 || part.length > 128)) return null;
  return { client_id: parts[1], session_id: parts[2], secret: parts[3] };
}

/**
 * OAuth scope lists (RFC 6749 §3.3). Pure, shared by the oauth-client actor
 * (a refresh may narrow the granted scope, never widen it; client_credentials
 * within the registered scope) and the edge (authorization requests).
 */
export function scopeSubset(requested: readonly string[], allowed: readonly string[]): boolean {
  return requested.every((scope) => allowed.includes(scope));
}

/** Scopes that only make sense for a user: never granted to a client_credentials token. */
export const USER_ONLY_SCOPES: readonly string[] = ['auth:read'];

/**
 * OAuth scope lists (RFC 6749 §3.3). Pure, shared by the oauth-client actor
 * (a refresh may narrow the granted scope, never widen it) and the edge
 * (authorization and client_credentials requests against a client's scope).
 */
export function scopeSubset(requested: readonly string[], allowed: readonly string[]): boolean {
  return requested.every((scope) => allowed.includes(scope));
}

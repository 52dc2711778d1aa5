/**
 * Which routes answer with a secret: a credential or key material shown once
 * (an API key, a token, a webhook's signing secret, TOTP backup codes, a
 * vault's holder shares). The idempotency store keeps a POST's answer so a
 * retry gets it back; for these routes it must not, or a copy of the data
 * directory would hold the secret in clear (the service keeps only hashes of
 * credentials, and never a vault's shares).
 *
 * A route is such a route when a property of one of its 2xx response schemas,
 * at any depth, has one of the names below; a route can also say so itself
 * (`config.secretResponse`, for answers whose secret has an ordinary name,
 * such as a form submission's decrypted fields).
 */
export const SECRET_PROPERTY_NAMES: ReadonlySet<string> = new Set([
  // Not `key`: most are names (a lock's key, an agent's key); the API key route says so itself.
  'token',
  'secret',
  'client_secret',
  'access_token',
  'refresh_token',
  'id_token',
  'backup_codes',
  'holder_shares',
  'content_key',
  'device_code',
  'user_code',
]);

type Schema = Record<string, unknown>;

function holdsSecret(schema: unknown, depth = 0): boolean {
  if (schema === null || typeof schema !== 'object' || depth > 32) return false;
  const s = schema as Schema;
  const properties = s.properties as Record<string, unknown> | undefined;
  if (properties) {
    for (const [name, value] of Object.entries(properties)) {
      if (SECRET_PROPERTY_NAMES.has(name) || holdsSecret(value, depth + 1)) return true;
    }
  }
  for (const keyword of ['anyOf', 'oneOf', 'allOf'] as const) {
    const branches = s[keyword];
    if (Array.isArray(branches) && branches.some((b) => holdsSecret(b, depth + 1))) return true;
  }
  return holdsSecret(s.items, depth + 1) || holdsSecret(s.additionalProperties, depth + 1);
}

/** Whether any 2xx answer in a route's `schema.response` may carry a secret. */
export function responseHoldsSecret(response: unknown): boolean {
  if (response === null || typeof response !== 'object') return false;
  return Object.entries(response as Record<string, unknown>).some(([status, schema]) => /^2/.test(status) && holdsSecret(schema));
}

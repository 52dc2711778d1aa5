import { randomBytes } from 'node:crypto';
import { hashSecret } from './tokens.js';

/**
 * API key format, scope catalog and the scope a route needs. A key is
 * `pk_<key_id>_<secret>`: key_id is 32 lowercase hex characters (the api-key
 * actor's key), secret is 32 random bytes in base64url (43 characters, may
 * itself contain `_`). `key_prefix` is the first 12 characters of the key
 * (`pk_` and the first 9 characters of the id). Only sha256(secret) is stored.
 */
export const API_KEY_PREFIX_LENGTH = 12;
/** Keys one user may hold at once (revoked and expired ones count until deleted). */
export const API_KEYS_PER_USER_MAX = 100;

const KEY_PATTERN = /^pk_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$/;

export interface NewApiKey {
  api_key_id: string;
  key: string;
  key_hash: string;
  key_prefix: string;
}

export function newApiKey(): NewApiKey {
  const api_key_id = randomBytes(16).toString('hex');
  const secret = randomBytes(32).toString('base64url');
  const key = `pk_${api_key_id}_${secret}`;
  return { api_key_id, key, key_hash: hashSecret(secret), key_prefix: key.slice(0, API_KEY_PREFIX_LENGTH) };
}

export function looksLikeApiKey(token: string): boolean {
  return token.startsWith('pk_');
}

export function parseApiKey(token: string): { api_key_id: string; key_hash: string } | null {
  const match = KEY_PATTERN.exec(token);
  if (!match) return null;
  return { api_key_id: match[1], key_hash: hashSecret(match[2]) };
}

/** Every scope a key may hold. `*` is every scope. */
export const API_KEY_SCOPES = [
  '*',
  'auth:read',
  'locks:read',
  'locks:write',
  'liveness:read',
  'liveness:write',
  'presence:read',
  'presence:write',
  'waiting_rooms:read',
  'waiting_rooms:write',
  'webhooks:read',
  'webhooks:write',
  'jobs:read',
  'jobs:write',
  'mq:read',
  'mq:write',
  'throttle:read',
  'throttle:write',
  'x402:read',
  'x402:write',
  'agents:read',
  'agents:write',
  'vault:read',
  'vault:write',
  'forms:read',
  'forms:write',
  'lineage:read',
  'lineage:write',
  'talent:read',
  'talent:write',
  'items:read',
  'items:write',
  'ledger:read',
  'ledger:write',
  'auctions:read',
  'auctions:write',
  'handshake:read',
  'handshake:write',
  'ecs:read',
  'ecs:write',
  'rituals:read',
  'rituals:write',
] as const;

export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];

/** Route URL-template prefix -> scope area. The first match wins. */
const AREAS: [prefix: string, area: string][] = [
  ['/api/v1/auth/me', 'auth'],
  ['/api/v1/distributed-state/', 'locks'],
  ['/api/v1/liveness', 'liveness'],
  ['/api/v1/presence', 'presence'],
  ['/api/v1/waiting-rooms', 'waiting_rooms'],
  ['/api/v1/webhooks', 'webhooks'],
  ['/api/v1/mq', 'mq'],
  ['/api/v1/throttle', 'throttle'],
  ['/api/v1/x402', 'x402'],
  ['/api/v1/agents', 'agents'],
  ['/api/v1/vault', 'vault'],
  ['/api/v1/forms', 'forms'],
  ['/api/v1/lineage', 'lineage'],
  ['/api/v1/talent', 'talent'],
  ['/api/v1/items', 'items'],
  ['/api/v1/ledger', 'ledger'],
  ['/api/v1/auctions', 'auctions'],
  ['/api/v1/handshake', 'handshake'],
  ['/api/v1/ecs', 'ecs'],
  ['/api/v1/rituals', 'rituals'],
  ['/api/v1/job-queues', 'jobs'],
  ['/api/v1/jobs', 'jobs'],
  ['/api/v1/queues', 'jobs'],
];

/** Routes that never accept an API key: credential management (keys, 2FA, logout, sessions). */
const CREDENTIAL_ROUTES = '/api/v1/auth/';

export type ScopeRequirement =
  | { kind: 'scope'; scope: string }
  /** A route outside the catalog: only a `*` key may call it. */
  | { kind: 'wildcard' }
  /** Credential management: no API key at all. */
  | { kind: 'refused' };

/** The scope a request needs, from its route's URL template and method (GET/HEAD read, others write). */
export function requiredScope(url: string, method: string): ScopeRequirement {
  const access = method === 'GET' || method === 'HEAD' ? 'read' : 'write';
  for (const [prefix, area] of AREAS) {
    if (url === prefix || url.startsWith(prefix.endsWith('/') ? prefix : `${prefix}/`)) {
      if (area === 'auth' && access !== 'read') return { kind: 'refused' };
      return { kind: 'scope', scope: `${area}:${access}` };
    }
  }
  if (url.startsWith(CREDENTIAL_ROUTES)) return { kind: 'refused' };
  return { kind: 'wildcard' };
}

export function scopeAllows(scopes: readonly string[], requirement: ScopeRequirement): boolean {
  switch (requirement.kind) {
    case 'refused':
      return false;
    case 'wildcard':
      return scopes.includes('*');
    case 'scope':
      return scopes.includes('*') || scopes.includes(requirement.scope);
  }
}

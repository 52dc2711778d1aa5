import { randomBytes } from 'node:crypto';
import { hashSecret } from '../auth/tokens.js';

/**
 * SCIM provisioning tokens: `scim_<org>.<token_id>.<secret>` where `<org>` is
 * base64url(org_id) (so the organization comes from the credential itself),
 * `<token_id>` 24 hex characters and `<secret>` 32 random bytes in base64url.
 * Only sha256(secret) is stored, in the organization's scim-directory actor.
 */
const TOKEN_PATTERN = /^scim_([A-Za-z0-9_-]{1,400})\.([0-9a-f]{24})\.([A-Za-z0-9_-]{43})$/;

export interface NewScimToken {
  token_id: string;
  token: string;
  secret_hash: string;
}

export function newScimToken(org_id: string): NewScimToken {
  const token_id = randomBytes(12).toString('hex');
  const secret = randomBytes(32).toString('base64url');
  return { token_id, token: `scim_${Buffer.from(org_id).toString('base64url')}.${token_id}.${secret}`, secret_hash: hashSecret(secret) };
}

export function parseScimToken(token: string): { org_id: string; token_id: string; secret_hash: string } | null {
  const match = TOKEN_PATTERN.exec(token);
  if (!match) return null;
  const org_id = Buffer.from(match[1], 'base64url').toString('utf8');
  if (org_id.length === 0 || Buffer.from(org_id).toString('base64url') !== match[1]) return null;
  return { org_id, token_id: match[2], secret_hash: hashSecret(match[3]) };
}

import { isServiceError, ServiceError } from '../../runtime/index.js';
import { USER_KIND, type PublicUser, type SessionPrincipal } from '../../actors/accounts/messages.js';
import { API_KEY_KIND, type ApiKeyView } from '../../actors/api-keys/messages.js';
import type { ScimMintedBy } from '../../actors/scim/messages.js';
import type { Principal } from '../auth/principal.js';
import type { AppServices } from '../services.js';

/**
 * A SCIM token lives only as long as the credential that minted it
 * (docs/api/scim.md, "Provisioning tokens"): checked on every SCIM request,
 * with read-only asks, so deleting the key, logging out or banning the
 * owner cuts SCIM off at once.
 *
 * - A session (access token): the user actor's `authenticate` (the session
 *   not ended or expired, the user not banned or deleted), through this
 *   node's session cache like any bearer check: every revoking change drops
 *   the user's entries on every node before it answers
 *   (http/auth/revocation-aware-client.ts).
 * - An API key: the key actor (not deleted, not revoked, not expired) and
 *   the user actor (not banned or deleted). Not cached.
 */
export const MINTING_CREDENTIAL_GONE = 'The credential that issued this SCIM token (a session or API key) has ended, or its user is banned: issue a new SCIM token.';

/** What a principal mints SCIM tokens with: its session, or its API key; null for a credential with neither (an OAuth client). */
export function mintingCredential(principal: Principal): ScimMintedBy | null {
  if (principal.credential === 'api_key' && principal.api_key_id) return { kind: 'api_key', api_key_id: principal.api_key_id };
  if (principal.credential === 'access_token' && principal.session_id !== '') return { kind: 'session', session_id: principal.session_id };
  return null;
}

/** Resolves when the minting credential is live; 401 `unauthorized` otherwise. */
export async function requireLiveMintingCredential(services: AppServices, user_id: string, minted_by: ScimMintedBy): Promise<void> {
  const gone = () => new ServiceError('unauthorized', MINTING_CREDENTIAL_GONE);
  try {
    if (minted_by.kind === 'session') {
      const cache = services.sessionCache;
      if (cache.get(user_id, minted_by.session_id, services.clock.now())) return;
      const generation = cache.generation(user_id);
      const session = await services.actors.ask<SessionPrincipal>(USER_KIND, user_id, { op: 'authenticate', session_id: minted_by.session_id }, { readOnly: true });
      cache.put(session, generation, services.clock.now());
      return;
    }
    const [key, user] = await Promise.all([
      services.actors.ask<ApiKeyView>(API_KEY_KIND, minted_by.api_key_id, { op: 'get', user_id }, { readOnly: true }),
      services.actors.ask<PublicUser>(USER_KIND, user_id, { op: 'get' }, { readOnly: true }),
    ]);
    const now = services.clock.now();
    if (key.revoked || (key.expires_at_ms !== null && key.expires_at_ms <= now) || user.banned) throw gone();
  } catch (error) {
    if (isServiceError(error) && (error.code === 'unauthorized' || error.code === 'not_found')) throw gone();
    throw error;
  }
}

import { isServiceError, ServiceError, type ActorClient, type Clock } from '../../runtime/index.js';
import { USER_KIND, type PublicUser } from '../../actors/accounts/messages.js';
import { API_KEY_KIND, type VerifiedKey } from '../../actors/api-keys/messages.js';
import type { ApiKeyCheck, SessionCache } from './session-cache.js';
import { partitionUnavailable, SESSION_CHECK_FALLBACK_DEADLINE_MS } from './session-check.js';

/** The one 401 message of every refused API key (docs/api/api-keys.md). */
export const API_KEY_REJECTED = 'The API key is invalid, revoked or expired.';

export interface ApiKeyCheckResult {
  check: ApiKeyCheck;
  /** Answered from this node's last positive check because the key's or the owner's partition is unavailable. */
  degraded: boolean;
}

/**
 * Is this API key live, and its owner an existing, unbanned user? Asks the
 * key's actor (hash, revocation, expiry) and then the owner's actor, on every
 * request: there is no fresh window. A positive answer is kept as this
 * node's last positive check of the key (session-cache.ts); it is used only
 * when one of the two actors cannot be asked because its partition is
 * unavailable (`partition_unavailable`, `not_leader`), for up to
 * SESSION_DEGRADE_MS_MAX after it was made, never past the key's expiry, and
 * only for the same secret. With such a check at hand, each ask waits
 * SESSION_CHECK_FALLBACK_DEADLINE_MS for its partition, as the session check
 * does. A revocation, scope change or deletion of the key, and a ban,
 * deletion or role change of its owner, drop it on every node before they
 * answer (revocation-aware-client.ts), and a check in flight across such a
 * drop is neither stored nor answered from the fallback (generations). A
 * refusal (401, 404, a banned owner) deletes it. A degraded answer is not
 * stored (it does not extend its own window).
 *
 * Refusals are 401 `unauthorized` with API_KEY_REJECTED. An organization's
 * key's membership is not part of this check: the caller asks it live.
 */
export async function checkApiKey(actors: ActorClient, cache: SessionCache, clock: Clock, api_key_id: string, key_hash: string): Promise<ApiKeyCheckResult> {
  const keyGeneration = cache.apiKeyGeneration(api_key_id);
  const fallback = cache.lastApiKey(api_key_id, key_hash, clock.now());
  // A key's owner never changes: with a fallback at hand, the owner's generation is read before either ask.
  let userGeneration = fallback ? cache.generation(fallback.user_id) : undefined;
  const deadlineMs = fallback ? SESSION_CHECK_FALLBACK_DEADLINE_MS : undefined;
  let key: VerifiedKey;
  let user: PublicUser;
  try {
    key = await actors.ask<VerifiedKey>(API_KEY_KIND, api_key_id, { op: 'verify', key_hash }, { deadlineMs });
    if (key.user_id !== fallback?.user_id) userGeneration = cache.generation(key.user_id);
    user = await actors.ask<PublicUser>(USER_KIND, key.user_id, { op: 'get' }, { readOnly: true, deadlineMs });
  } catch (error) {
    if (isServiceError(error) && error.statusCode < 500) cache.forgetApiKey(api_key_id);
    // Read again: a drop of the key or of its owner while the asks were pending deleted it.
    const last = fallback && partitionUnavailable(error) ? cache.lastApiKey(api_key_id, key_hash, clock.now()) : undefined;
    if (last && cache.apiKeyGeneration(api_key_id) === keyGeneration && cache.generation(last.user_id) === userGeneration) {
      return { check: last, degraded: true };
    }
    if (isServiceError(error) && (error.code === 'unauthorized' || error.code === 'not_found')) throw new ServiceError('unauthorized', API_KEY_REJECTED);
    throw error;
  }
  if (user.banned) {
    cache.forgetApiKey(api_key_id);
    throw new ServiceError('unauthorized', API_KEY_REJECTED);
  }
  const check: ApiKeyCheck = {
    api_key_id: key.api_key_id,
    key_hash,
    user_id: user.id,
    role: user.role,
    org_id: key.org_id ?? null,
    scopes: key.scopes,
    expires_at_ms: key.expires_at_ms ?? null,
  };
  // A reply without expires_at_ms (a node older than it) says nothing of the key's expiry: not kept.
  if (key.expires_at_ms !== undefined) cache.putApiKey(check, keyGeneration, userGeneration!, clock.now());
  return { check, degraded: false };
}

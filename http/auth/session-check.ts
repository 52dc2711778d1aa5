import { isServiceError, type ActorClient, type Clock } from '../../runtime/index.js';
import { USER_KIND, type SessionPrincipal } from '../../actors/accounts/messages.js';
import type { SessionCache } from './session-cache.js';

/**
 * How long a session check waits for the user's partition when this node
 * has a last positive answer to fall back on (instead of FORWARD_DEADLINE_MS).
 */
export const SESSION_CHECK_FALLBACK_DEADLINE_MS = 1_000;

/** The user's partition could not answer: no leader in time, a broken or timed-out forward. Nothing was decided. */
export function partitionUnavailable(error: unknown): boolean {
  return isServiceError(error) && (error.code === 'partition_unavailable' || error.code === 'not_leader');
}

export interface SessionCheck {
  session: SessionPrincipal;
  /** Answered from the last positive check because the user's partition is unavailable. */
  degraded: boolean;
}

/** The session, if this node's check of it is fresh (checkSession's first step, without a promise: the edge tries it first). */
export function cachedSession(cache: SessionCache, clock: Clock, user_id: string, session_id: string): SessionPrincipal | undefined {
  return cache.get(user_id, session_id, clock.now());
}

/**
 * Is this session live? From the cache while its check is fresh; else by
 * asking the user actor (then cached). If the actor cannot be asked because
 * its partition is unavailable, from this node's last positive check while
 * it is younger than SESSION_DEGRADE_MS_MAX (session-cache.ts: a revocation
 * deletes it everywhere first, so this never serves a revoked session).
 * A negative answer deletes the last positive one; a degraded answer is
 * not stored (it does not extend its own window).
 */
export async function checkSession(actors: ActorClient, cache: SessionCache, clock: Clock, user_id: string, session_id: string): Promise<SessionCheck> {
  const cached = cachedSession(cache, clock, user_id, session_id);
  if (cached) return { session: cached, degraded: false };
  const generation = cache.generation(user_id);
  const fallback = cache.lastPositive(user_id, session_id, clock.now()) !== undefined;
  try {
    const session = await actors.ask<SessionPrincipal>(
      USER_KIND,
      user_id,
      { op: 'authenticate', session_id },
      { readOnly: true, deadlineMs: fallback ? SESSION_CHECK_FALLBACK_DEADLINE_MS : undefined },
    );
    // Impersonation sessions are never stored (SessionCache.put); their admin is checked by the caller on each request.
    cache.put(session, generation, clock.now());
    return { session, degraded: false };
  } catch (error) {
    if (isServiceError(error) && error.statusCode < 500) cache.forgetSession(user_id, session_id);
    // Read again: a drop of the user while the ask was pending deleted it.
    const last = partitionUnavailable(error) ? cache.lastPositive(user_id, session_id, clock.now()) : undefined;
    if (!last || cache.generation(user_id) !== generation) throw error;
    return { session: last, degraded: true };
  }
}

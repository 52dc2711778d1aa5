import { type SessionPrincipal } from '../../actors/accounts/messages.js';

/**
 * This node's memory of recent positive session checks, so a busy token does
 * not ask its user's actor (in a cluster: often another node) on every
 * request. Revocation stays immediate: every change that can end a session
 * or change a role goes through RevocationAwareActorClient, which drops the
 * user's entries here and on every other node before its reply is released.
 *
 * A check that was in flight while the user's entries were dropped is not
 * stored: each user has a generation, bumped by every drop, and a check is
 * stored only if the generation it started under is still current.
 * Entries also expire after a few seconds (and never outlive the session),
 * which bounds what a node cut off from a drop could still accept.
 *
 * The degrade rule: while the user's partition cannot answer (no live
 * replica, a failover, a forward timeout), the edge may use this node's last
 * positive check of the session for up to SESSION_DEGRADE_MS_MAX after it
 * was made (`lastPositive`), so that one partition's outage does not fail
 * every request of its users. It is the same entry, kept past its TTL for
 * that purpose only: a drop deletes it with the fresh one (and the
 * generation stops a check in flight from storing it again), so a revoked
 * session is never served from it; a negative answer deletes it too
 * (`forget`).
 */
export const SESSION_CACHE_TTL_MS = 5_000;
/** How long after a positive check it may still be used while the user's partition is unavailable. */
export const SESSION_DEGRADE_MS_MAX = 60_000;
const ENTRIES_MAX = 100_000;
/** Per-user generations kept before starting a new cache epoch (which refuses every check in flight). */
const GENERATIONS_MAX = 100_000;

interface Entry {
  principal: SessionPrincipal;
  /** Fresh (answered without asking) until then. */
  until_ms: number;
  /** Usable by the degrade rule until then; the entry is deleted after. */
  degradeUntil_ms: number;
}

export class SessionCache {
  private readonly entries = new Map<string, Entry>();
  private readonly keysByUser = new Map<string, Set<string>>();
  private readonly generations = new Map<string, number>();
  /** Bumped when the generations map is reset, so a check in flight across the reset is refused too. */
  private epoch = 0;

  /** A check younger than SESSION_CACHE_TTL_MS: the session may be taken as live without asking. */
  get(user_id: string, session_id: string, now_ms: number): SessionPrincipal | undefined {
    const entry = this.live(user_id, session_id, now_ms);
    return entry && entry.until_ms > now_ms ? entry.principal : undefined;
  }

  /**
   * The last positive check, if younger than SESSION_DEGRADE_MS_MAX and the
   * session has not expired since. Only for when the user's actor cannot be
   * asked (its partition is unavailable): never after a drop of the user.
   */
  lastPositive(user_id: string, session_id: string, now_ms: number): SessionPrincipal | undefined {
    return this.live(user_id, session_id, now_ms)?.principal;
  }

  /** The user's actor said the session is gone: no stale copy of it may be used. */
  forgetSession(user_id: string, session_id: string): void {
    this.forget(user_id, `${user_id}\u0000${session_id}`);
  }

  private live(user_id: string, session_id: string, now_ms: number): Entry | undefined {
    const key = `${user_id}\u0000${session_id}`;
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.degradeUntil_ms <= now_ms) {
      this.forget(user_id, key);
      return undefined;
    }
    return entry;
  }

  /** Call before asking the user actor; pass the result to put(). */
  generation(user_id: string): number {
    return this.epoch * 2 ** 32 + (this.generations.get(user_id) ?? 0);
  }

  put(principal: SessionPrincipal, generation: number, now_ms: number): void {
    // Impersonation sessions are not kept: they also depend on the admin being
    // a live admin, and a ban, deletion or demotion of the admin drops the
    // admin's entries, not the target's. Not caching them is simpler than a
    // second index by admin, and costs little: they are few and last at most
    // an hour (the edge then asks both user actors on each request).
    if (principal.impersonated_by) return;
    if (this.generation(principal.user_id) !== generation) return;
    if (this.entries.size >= ENTRIES_MAX) this.clear();
    const key = `${principal.user_id}\u0000${principal.session_id}`;
    this.entries.set(key, {
      principal,
      until_ms: Math.min(now_ms + SESSION_CACHE_TTL_MS, principal.expires_at_ms),
      degradeUntil_ms: Math.min(now_ms + SESSION_DEGRADE_MS_MAX, principal.expires_at_ms),
    });
    let keys = this.keysByUser.get(principal.user_id);
    if (!keys) this.keysByUser.set(principal.user_id, (keys = new Set()));
    keys.add(key);
  }

  /** Drops every entry of the user, and any check of theirs still in flight. */
  dropUser(user_id: string): void {
    if (this.generations.size >= GENERATIONS_MAX) {
      this.epoch++;
      this.generations.clear();
      this.clear();
    }
    this.generations.set(user_id, (this.generations.get(user_id) ?? 0) + 1);
    for (const key of this.keysByUser.get(user_id) ?? []) this.entries.delete(key);
    this.keysByUser.delete(user_id);
  }

  get size(): number {
    return this.entries.size;
  }

  private forget(user_id: string, key: string): void {
    this.entries.delete(key);
    const keys = this.keysByUser.get(user_id);
    keys?.delete(key);
    if (keys && keys.size === 0) this.keysByUser.delete(user_id);
  }

  /** Bounded memory: a full cache starts over (generations are kept, so no in-flight check slips in). */
  private clear(): void {
    this.entries.clear();
    this.keysByUser.clear();
  }
}

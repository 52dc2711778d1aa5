import { timingSafeEqual } from 'node:crypto';
import { type Role, type SessionPrincipal } from '../../actors/accounts/messages.js';

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
 *
 * API keys get the same degrade rule, and nothing else: this node keeps its
 * last positive check of each key (`putApiKey`: the key's hash, its owner,
 * role, organization and scopes, and when it was made), never used while
 * the key's and the owner's actors can be asked (there is no fresh window:
 * every request with a key asks them), only when one of them cannot
 * (`lastApiKey`), for up to SESSION_DEGRADE_MS_MAX after the check and never
 * past the key's expiry. A drop of the owner deletes it (ban, deletion, role
 * change: the same drops as sessions), and so does a drop of the key
 * (`dropApiKey`: a revocation, a scope change or a deletion of the key goes
 * through RevocationAwareActorClient, which drops it on every node before its
 * reply is released). Each key has a generation too, and a key check is
 * stored only if neither the key's nor the owner's generation moved while it
 * was in flight.
 */
export const SESSION_CACHE_TTL_MS = 5_000;
/** How long after a positive check it may still be used while the user's partition is unavailable. */
export const SESSION_DEGRADE_MS_MAX = 60_000;
const ENTRIES_MAX = 100_000;
const API_KEY_ENTRIES_MAX = 100_000;
/** Per-user (and per-key) generations kept before starting a new cache epoch (which refuses every check in flight). */
const GENERATIONS_MAX = 100_000;

interface Entry {
  principal: SessionPrincipal;
  /** Fresh (answered without asking) until then. */
  until_ms: number;
  /** Usable by the degrade rule until then; the entry is deleted after. */
  degradeUntil_ms: number;
}

/** A positive check of an API key: the key's actor verified it, and its owner's actor said they exist, unbanned, with this role. */
export interface ApiKeyCheck {
  api_key_id: string;
  /** sha256 of the key's secret: the check is only for a request presenting that same key. */
  key_hash: string;
  user_id: string;
  role: Role;
  org_id: string | null;
  scopes: string[];
  /** The key's expiry (null: never). */
  expires_at_ms: number | null;
}

interface ApiKeyEntry {
  check: ApiKeyCheck;
  /** Usable by the degrade rule until then; the entry is deleted after. */
  degradeUntil_ms: number;
}

export class SessionCache {
  private readonly entries = new Map<string, Entry>();
  private readonly keysByUser = new Map<string, Set<string>>();
  private readonly generations = new Map<string, number>();
  private readonly apiKeyEntries = new Map<string, ApiKeyEntry>();
  private readonly apiKeysByUser = new Map<string, Set<string>>();
  private readonly apiKeyGenerations = new Map<string, number>();
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

  /** Drops every entry of the user (sessions and API keys), and any check of theirs still in flight. */
  dropUser(user_id: string): void {
    if (this.generations.size >= GENERATIONS_MAX) this.newEpoch();
    this.generations.set(user_id, (this.generations.get(user_id) ?? 0) + 1);
    for (const key of this.keysByUser.get(user_id) ?? []) this.entries.delete(key);
    this.keysByUser.delete(user_id);
    for (const api_key_id of this.apiKeysByUser.get(user_id) ?? []) this.apiKeyEntries.delete(api_key_id);
    this.apiKeysByUser.delete(user_id);
  }

  get size(): number {
    return this.entries.size;
  }

  // --- API keys: the last positive check, for the degrade rule only ---------

  /** Call before asking the key's actor; pass the result to putApiKey(). */
  apiKeyGeneration(api_key_id: string): number {
    return this.epoch * 2 ** 32 + (this.apiKeyGenerations.get(api_key_id) ?? 0);
  }

  /**
   * Keeps a positive check of the key, unless the key or its owner was
   * dropped since the generations were read (the check raced a revocation)
   * or it has expired.
   */
  putApiKey(check: ApiKeyCheck, keyGeneration: number, userGeneration: number, now_ms: number): void {
    if (this.apiKeyGeneration(check.api_key_id) !== keyGeneration || this.generation(check.user_id) !== userGeneration) return;
    const expires_at_ms = check.expires_at_ms ?? Number.POSITIVE_INFINITY;
    if (expires_at_ms <= now_ms) return;
    if (this.apiKeyEntries.size >= API_KEY_ENTRIES_MAX) this.clearApiKeys();
    const previous = this.apiKeyEntries.get(check.api_key_id);
    if (previous && previous.check.user_id !== check.user_id) this.forgetApiKey(check.api_key_id);
    this.apiKeyEntries.set(check.api_key_id, { check, degradeUntil_ms: Math.min(now_ms + SESSION_DEGRADE_MS_MAX, expires_at_ms) });
    let keys = this.apiKeysByUser.get(check.user_id);
    if (!keys) this.apiKeysByUser.set(check.user_id, (keys = new Set()));
    keys.add(check.api_key_id);
  }

  /**
   * The last positive check of the key, if younger than
   * SESSION_DEGRADE_MS_MAX, the key has not expired since, and `key_hash`
   * is the hash it was made for. Only for when the key's or the owner's
   * actor cannot be asked (its partition is unavailable).
   */
  lastApiKey(api_key_id: string, key_hash: string, now_ms: number): ApiKeyCheck | undefined {
    const entry = this.apiKeyEntries.get(api_key_id);
    if (!entry) return undefined;
    if (entry.degradeUntil_ms <= now_ms) {
      this.forgetApiKey(api_key_id);
      return undefined;
    }
    return sameHash(entry.check.key_hash, key_hash) ? entry.check : undefined;
  }

  /** The key's or the owner's actor refused the key: no stale copy of its check may be used. */
  forgetApiKey(api_key_id: string): void {
    const entry = this.apiKeyEntries.get(api_key_id);
    if (!entry) return;
    this.apiKeyEntries.delete(api_key_id);
    const keys = this.apiKeysByUser.get(entry.check.user_id);
    keys?.delete(api_key_id);
    if (keys && keys.size === 0) this.apiKeysByUser.delete(entry.check.user_id);
  }

  /** The key was revoked, changed or deleted: drops its check, and any check of it still in flight. */
  dropApiKey(api_key_id: string): void {
    if (this.apiKeyGenerations.size >= GENERATIONS_MAX) this.newEpoch();
    this.apiKeyGenerations.set(api_key_id, (this.apiKeyGenerations.get(api_key_id) ?? 0) + 1);
    this.forgetApiKey(api_key_id);
  }

  get apiKeySize(): number {
    return this.apiKeyEntries.size;
  }

  /** Bounded generations: starts over, refusing every check in flight (by the epoch) and keeping nothing. */
  private newEpoch(): void {
    this.epoch++;
    this.generations.clear();
    this.apiKeyGenerations.clear();
    this.clear();
    this.clearApiKeys();
  }

  private clearApiKeys(): void {
    this.apiKeyEntries.clear();
    this.apiKeysByUser.clear();
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

function sameHash(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

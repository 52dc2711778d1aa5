import type { ActorClient, Clock } from '../../runtime/index.js';
import {
  RATE_LIMIT_RULES_KEY,
  RATE_LIMIT_RULES_KIND,
  RATE_LIMIT_WINDOW_KIND,
  rateLimitWindowKey,
  type Limit,
  type RateLimitCaller,
  type ReserveReply,
  type RulesReply,
  type RuleSetView,
  type WindowMessage,
} from '../../actors/rate-limits/messages.js';
import type { AppliedLimit } from './resolve.js';


/** Cluster: how long the limiter waits for a window's or the rules' partition before failing open (docs/api/rate-limits.md, "Fail open"). */
export const LIMITER_ASK_DEADLINE_MS = 1_000;
/**
 * The node's side of rate limiting: a short cache of the rule set, and a
 * table of leases, one per (caller, scope) this node has seen lately.
 *
 * A request spends a token of its lease locally (no actor message); when the
 * lease is spent or has ended, one `reserve` to the window actor gives back
 * what is left of it and takes a new one. Concurrent requests of one caller
 * wait for that one reserve instead of sending their own. A refusal is
 * remembered until the window has room again, so a caller hammering a full
 * window costs no actor message either. See docs/api/rate-limits.md, "How
 * enforcement works", for why this admits no request beyond the limit.
 */
export interface LimiterSettings {
  defaultLimit: Limit;
  /** How long a fetched rule set is used before it is checked again (RATE_LIMITS_RULES_CACHE_MS). */
  rulesCacheMs: number;
}

export interface Decision {
  allowed: boolean;
  /** Tokens left in the caller's window, as far as this node knows (a lower bound on one node). */
  remaining: number;
  /** Seconds until the window has room (denied) or until it is next empty (allowed). */
  reset_seconds: number;
  retry_after_seconds: number;
}

/**
 * A caller's handle on its lease under one scope: the node's key for it
 * (localKeyOf), and the lease itself once found, so the hot path reads the
 * lease without looking the key up in the lease table (LeaseRefs in
 * resolve.ts keeps one per caller and scope). Any number of refs may name
 * one key: a ref whose lease has left the table finds the table's current
 * one by its key. Until then it keeps the dropped lease in memory (a few
 * hundred bytes; LeaseRefs holds at most 100,000 refs).
 */
export interface LeaseRef {
  readonly key: string;
  lease: LeaseEntry | null;
}

export function leaseRef(key: string): LeaseRef {
  return { key, lease: null };
}

interface LeaseEntry {
  /** Out of the lease table (swept, evicted, dropped): refs holding it look the key up again. */
  dropped: boolean;
  /** The window actor's key (rateLimitWindowKey), built once per lease entry, off the hot path. */
  actor_key: string;
  lease_id: string | null;
  /** Unspent tokens of the current lease. */
  tokens: number;
  /** This node's end of the lease: the time the reserve was sent + lease_ms (never later than the actor's). */
  lease_end_ms: number;
  actor_remaining: number;
  reset_at_ms: number;
  denied_until_ms: number;
  /** After this the window actor has nothing of this node's left to count: the sweep tells it to forget. */
  idle_after_ms: number;
  inflight: Promise<void> | null;
  waiting: number;
}

/** Past this many leases the oldest are dropped (their tokens stay counted until they expire: never an overshoot). */
const LEASES_MAX = 100_000;
/** A lease asks for this fraction of the limit (at least 1): about ten reserves per window for a caller at its limit. */
const LEASE_DIVISOR = 10;
/** Bounded rounds for one request waiting on other requests' reserves. */
const ACQUIRE_ROUNDS_MAX = 32;

/**
 * How long a lease lives: a tenth of the window, from 50 ms to 5 s. Its
 * tokens count until lease end + window, so a longer lease costs fewer
 * reserves (one per caller, scope and node per lease at most) and refuses
 * at most that much earlier than a perfect sliding window.
 *
 * A **roomy** lease, reserved while the caller's window is at most half full
 * (the previous reserve left at least half the limit after its grant), lives
 * half the window, at most 30 s. A caller far below its limit ends its
 * leases by time, not by tokens: each one is a reserve (an actor turn and a
 * commit) that admits nothing the lease would not have, so 200 callers cost
 * 40 reserves/s with 5 s leases and under 7 with 30 s ones. It costs nothing
 * in exactness and little in earliness: a lease holds a tenth of the limit
 * (more only for requests already waiting on it), so however long it lives,
 * what it counts longer than a perfect window is at most its own tokens; and
 * as the window fills past half, leases are short again.
 */
export const LEASE_MS_MAX = 5_000;
export const LEASE_MS_ROOMY_MAX = 30_000;
export function leaseMsFor(limit: Limit, roomy = false): number {
  const window_ms = limit.window_seconds * 1000;
  if (roomy) return Math.min(LEASE_MS_ROOMY_MAX, Math.max(50, Math.floor(window_ms / 2)));
  return Math.min(LEASE_MS_MAX, Math.max(50, Math.floor(window_ms / 10)));
}

/** Roomy (see leaseMsFor): the window actor's last word left at least half the limit free. */
export function isRoomy(limit: Limit, remaining_after_last_grant: number): boolean {
  return remaining_after_last_grant * 2 >= limit.max_requests;
}

/** How many tokens a node asks for at once: a tenth of the limit, at least what its waiting requests need. */
export function leaseWantFor(limit: Limit, waiting: number): number {
  return Math.min(limit.max_requests, Math.max(1, Math.ceil(limit.max_requests / LEASE_DIVISOR), waiting + 1));
}

export function newDecision(): Decision {
  return { allowed: false, remaining: 0, reset_seconds: 0, retry_after_seconds: 0 };
}

export interface ReserveContext {
  caller: RateLimitCaller;
  applied: AppliedLimit;
  endpoint: string;
  method: string;
}

export class EdgeLimiter {
  private rules: RuleSetView | null = null;
  private rulesCheckedAt = 0;
  private rulesInflight: Promise<RuleSetView> | null = null;
  private epoch: number | null = null;
  /** The version of the rule set the leases were decided under (kept when `rules` is dropped). */
  private rulesVersion: number | null = null;
  private readonly leases = new Map<string, LeaseEntry>();
  /** Counts for metrics and the bench: reserves sent, and the outcome of each request. */
  readonly counts = { reserves: 0, allowed: 0, limited: 0, failedOpen: 0 };

  constructor(
    private readonly actors: ActorClient,
    private readonly clock: Clock,
    readonly settings: LimiterSettings,
    private readonly onReserveError: (error: unknown) => void = () => {},
  ) {}

  /** The rule set if it is fresh (no promise on the hot path), else a promise of it. */
  currentRules(now = this.clock.now()): RuleSetView | Promise<RuleSetView> {
    if (this.rules && now - this.rulesCheckedAt < this.settings.rulesCacheMs) return this.rules;
    const refresh = this.refreshRules();
    if (!this.rules) return refresh;
    // Stale while the check runs: at most one ask's latency past the cache time. A failed check is
    // reported and tried again by a later request; the stale rules go on applying meanwhile.
    refresh.catch((error: unknown) => this.onReserveError(error));
    return this.rules;
  }

  private refreshRules(): Promise<RuleSetView> {
    this.rulesInflight ??= (async () => {
      try {
        const known = this.rules?.version ?? null;
        const reply = await this.actors.ask<RulesReply>(RATE_LIMIT_RULES_KIND, RATE_LIMIT_RULES_KEY, { op: 'rules', known_version: known }, { readOnly: true, deadlineMs: LIMITER_ASK_DEADLINE_MS });
        if (reply) {
          // A cache/clear anywhere, or any rule changed: leases and remembered refusals were decided
          // under the old limits (a raised limit must let a refused caller in at once, not at its retry time).
          const changed = (this.epoch !== null && reply.cache_epoch !== this.epoch) || (this.rulesVersion !== null && reply.version !== this.rulesVersion);
          if (changed) this.dropLeases();
          this.epoch = reply.cache_epoch;
          this.rulesVersion = reply.version;
          this.rules = reply;
        }
        this.rulesCheckedAt = this.clock.now();
        return this.rules!;
      } finally {
        this.rulesInflight = null;
      }
    })();
    return this.rulesInflight;
  }

  /** A rule changed through this node: the next request reads the rule set again (other nodes within rulesCacheMs). */
  rulesChanged(): void {
    this.rules = null;
  }

  /** cache/clear on this node: drop the rule set, the leases (their tokens given back) and the remembered refusals. */
  clear(): void {
    this.rules = null;
    this.dropLeases();
  }

  private dropLeases(): void {
    for (const lease of this.leases.values()) {
      lease.dropped = true;
      if (lease.lease_id && lease.tokens > 0) this.giveBack(lease.actor_key, lease.lease_id, lease.tokens);
    }
    this.leases.clear();
  }

  /** The ref's lease if it is still in the table, else the table's lease for its key (linked to the ref). */
  private leaseOf(ref: LeaseRef): LeaseEntry | null {
    const lease = ref.lease;
    if (lease !== null && !lease.dropped) return lease;
    return (ref.lease = this.leases.get(ref.key) ?? null);
  }

  private giveBack(key: string, lease_id: string, unused: number): void {
    this.actors.tell(RATE_LIMIT_WINDOW_KIND, key, { op: 'give_back', lease_id, unused } satisfies WindowMessage);
  }

  /**
   * The hot path: a decision without any message when the lease has a token
   * or the refusal is remembered; else null. The decision is written into
   * `into` (the plugin passes one it reuses: nothing is allocated here).
   */
  tryLocal(ref: LeaseRef, limit: Limit, now = this.clock.now(), into: Decision = newDecision()): Decision | null {
    const lease = this.leaseOf(ref);
    if (lease === null) return null;
    if (lease.tokens > 0 && now < lease.lease_end_ms) {
      lease.tokens -= 1;
      this.counts.allowed++;
      into.allowed = true;
      into.remaining = Math.min(limit.max_requests, lease.tokens + lease.actor_remaining);
      into.reset_seconds = Math.max(0, Math.ceil((lease.reset_at_ms - now) / 1000));
      into.retry_after_seconds = 0;
      return into;
    }
    if (now < lease.denied_until_ms) {
      this.counts.limited++;
      const wait = Math.max(1, Math.ceil((lease.denied_until_ms - now) / 1000));
      into.allowed = false;
      into.remaining = 0;
      into.reset_seconds = wait;
      into.retry_after_seconds = wait;
      return into;
    }
    return null;
  }

  /** The slow path: wait for (or send) this lease's reserve, then decide locally (into a decision of its own). */
  async acquire(ref: LeaseRef, context: ReserveContext): Promise<Decision> {
    const key = ref.key;
    for (let round = 0; round < ACQUIRE_ROUNDS_MAX; round++) {
      const local = this.tryLocal(ref, context.applied.limit);
      if (local) return local;
      let lease = this.leaseOf(ref);
      if (lease === null) {
        if (this.leases.size >= LEASES_MAX) this.evictOldest();
        lease = { dropped: false, actor_key: rateLimitWindowKey(context.caller.id, context.applied.scope), lease_id: null, tokens: 0, lease_end_ms: 0, actor_remaining: 0, reset_at_ms: 0, denied_until_ms: 0, idle_after_ms: 0, inflight: null, waiting: 0 };
        this.leases.set(key, lease);
        ref.lease = lease;
      }
      if (lease.inflight) {
        lease.waiting++;
        try {
          // Its failure is the sender's to report; this request tries again (and fails open itself if it must).
          await lease.inflight.catch(() => {});
        } finally {
          lease.waiting--;
        }
        continue;
      }
      const entry = lease;
      entry.inflight = this.reserve(key, entry, context).finally(() => {
        entry.inflight = null;
      });
      try {
        await entry.inflight;
      } catch (error) {
        // The window actor cannot answer (overload, failover): fail open for this request, as Envoy's
        // rate-limit filter does by default. Counted and logged; the next request tries again.
        this.counts.failedOpen++;
        this.onReserveError(error);
        return { allowed: true, remaining: 0, reset_seconds: 0, retry_after_seconds: 0 };
      }
    }
    this.counts.limited++;
    return { allowed: false, remaining: 0, reset_seconds: 1, retry_after_seconds: 1 };
  }

  private async reserve(key: string, lease: LeaseEntry, context: ReserveContext): Promise<void> {
    const limit = context.applied.limit;
    // actor_remaining is 0 before the first reply and after a refusal: the first lease is short.
    const lease_ms = leaseMsFor(limit, isRoomy(limit, lease.actor_remaining));
    // What is left of the previous lease goes back with this reserve and is no longer spendable here.
    const give_back = lease.lease_id && lease.tokens > 0 ? { lease_id: lease.lease_id, unused: lease.tokens } : undefined;
    lease.tokens = 0;
    lease.lease_id = null;
    const sentAt = this.clock.now();
    this.counts.reserves++;
    const message: WindowMessage = {
      op: 'reserve',
      want: leaseWantFor(limit, lease.waiting),
      limit,
      lease_ms,
      ...(give_back ? { give_back } : {}),
      caller: context.caller,
      policy: context.applied.policy,
      endpoint: context.endpoint,
      method: context.method,
    };
    // A short wait for the window's partition (failover, or no live replica): the limiter fails open, so a
    // request to a healthy partition is not held for FORWARD_DEADLINE_MS by its caller's window.
    const reply = await this.actors.ask<ReserveReply>(RATE_LIMIT_WINDOW_KIND, lease.actor_key, message, { deadlineMs: LIMITER_ASK_DEADLINE_MS });
    lease.lease_id = reply.lease_id;
    lease.tokens = reply.granted;
    lease.lease_end_ms = sentAt + lease_ms;
    lease.actor_remaining = reply.remaining;
    lease.reset_at_ms = reply.reset_at_ms;
    lease.denied_until_ms = reply.granted === 0 ? reply.retry_at_ms : 0;
    lease.idle_after_ms = Math.max(reply.reset_at_ms, sentAt + lease_ms + limit.window_seconds * 1000);
    const current = this.leases.get(key);
    if (current !== undefined && current !== lease) {
      // Dropped while its reserve was in flight (cache/clear), and the key has a new lease since: the
      // grant goes back and the table's lease stays (requests on this one look the key up again).
      if (reply.lease_id && reply.granted > 0) this.giveBack(lease.actor_key, reply.lease_id, reply.granted);
      lease.tokens = 0;
      return;
    }
    // Re-inserted at the end: the Map's order is the order of last reserve (eviction drops the oldest).
    // A lease dropped while its reserve was in flight and not replaced comes back with its grant.
    this.leases.delete(key);
    this.leases.set(key, lease);
    lease.dropped = false;
  }

  private evictOldest(): void {
    for (const [key, lease] of this.leases) {
      if (lease.inflight) continue;
      this.leases.delete(key);
      lease.dropped = true;
      return;
    }
  }

  /**
   * Drops the leases whose windows are over and tells their actors to
   * forget (the window record is deleted once nothing in it counts), so a
   * caller seen once leaves nothing behind. Run by the plugin on a timer.
   */
  sweep(): number {
    const now = this.clock.now();
    let forgotten = 0;
    for (const [key, lease] of this.leases) {
      if (lease.inflight || now <= lease.idle_after_ms || now < lease.denied_until_ms) continue;
      this.leases.delete(key);
      lease.dropped = true;
      this.actors.tell(RATE_LIMIT_WINDOW_KIND, lease.actor_key, { op: 'forget' } satisfies WindowMessage);
      forgotten++;
    }
    return forgotten;
  }

  leaseCount(): number {
    return this.leases.size;
  }
}


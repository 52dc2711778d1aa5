import type { Clock } from '../runtime/index.js';
import type { PlanReply } from '../actors/throttle/messages.js';

/**
 * The edge's short-lived copy of throttle plans, so a check costs one actor
 * turn (the subject's), not two. Entries are tagged with the plan
 * directory's sequence number: an answer never replaces a newer one, and a
 * change made through this node (create, update, delete) is in the cache
 * before its reply leaves. A change made through another node of a cluster
 * reaches this node within `ttl_ms` (THROTTLE_PLAN_CACHE_MS); meanwhile the
 * subject actors keep the newest rule any node sent them (docs/api/throttle.md).
 */
interface Entry {
  reply: PlanReply;
  fetched_ms: number;
}

export class ThrottlePlanCache {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly clock: Clock,
    private readonly ttl_ms: number,
    private readonly entries_max = 10_000,
  ) {}

  private static keyOf(tenant: string, plan_id: string): string {
    return JSON.stringify([tenant, plan_id]);
  }

  /** The cached answer, if younger than ttl_ms. */
  get(tenant: string, plan_id: string): PlanReply | undefined {
    const entry = this.entries.get(ThrottlePlanCache.keyOf(tenant, plan_id));
    if (!entry || this.clock.now() - entry.fetched_ms >= this.ttl_ms) return undefined;
    return entry.reply;
  }

  /** Keeps `reply` unless the cache holds a newer one (a higher seq) that is still fresh. */
  put(tenant: string, plan_id: string, reply: PlanReply): void {
    if (this.ttl_ms === 0) return;
    const key = ThrottlePlanCache.keyOf(tenant, plan_id);
    const current = this.entries.get(key);
    const now = this.clock.now();
    if (current && current.reply.seq > reply.seq && now - current.fetched_ms < this.ttl_ms) return;
    this.entries.delete(key);
    if (this.entries.size >= this.entries_max) {
      // Oldest insertion first: Map keeps insertion order.
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(key, { reply, fetched_ms: now });
  }
}

import { describe, expect, it } from 'vitest';
import { RATE_LIMIT_RULES_KIND, type WindowMessage } from '../../actors/rate-limits/messages.js';
import { emptyRulesState, stepRules } from '../../actors/rate-limits/rules-state.js';
import { stepWindow, type WindowStateOrNone } from '../../actors/rate-limits/window-state.js';
import { ManualClock, type ActorClient } from '../../runtime/index.js';
import { EdgeLimiter, isRoomy, leaseMsFor, leaseRef, leaseWantFor, type LeaseRef, type ReserveContext } from '../../http/rate-limits/limiter.js';
import { fixedContext } from '../helpers/step.js';

/**
 * The edge limiter against in-process actors (one turn at a time, each ask
 * answered on a later tick, as over the runtime): several limiters sharing
 * the actors are several nodes of a cluster.
 */
class FakeActors implements ActorClient {
  readonly windows = new Map<string, WindowStateOrNone>();
  readonly rules = emptyRulesState();
  asks = 0;
  constructor(private readonly clock: ManualClock) {}
  async ask<Reply>(kind: string, key: string, message: unknown): Promise<Reply> {
    this.asks++;
    await new Promise((resolve) => setImmediate(resolve));
    return this.turn(kind, key, message) as Reply;
  }
  tell(kind: string, key: string, message: unknown): void {
    void this.ask(kind, key, message);
  }
  private turn(kind: string, key: string, message: unknown): unknown {
    const context = fixedContext(this.clock.now(), kind, key);
    if (kind === RATE_LIMIT_RULES_KIND) return stepRules(this.rules, message as never, context).reply;
    const result = stepWindow(this.windows.get(key) ?? null, message as WindowMessage, context);
    this.windows.set(key, result.state);
    return result.reply;
  }
}

const context = (max: number, window_seconds = 60, user = 'u1'): ReserveContext => ({
  caller: { id: `user:${user}`, tenant: user, user_id: user },
  applied: { scope: 'default', policy: 'default', limit: { max_requests: max, window_seconds } },
  endpoint: '/api/v1/x',
  method: 'GET',
});
const settings = { defaultLimit: { max_requests: 1000, window_seconds: 60 }, rulesCacheMs: 1000 };

/** One ref per limiter and key, as the plugin's LeaseRefs keeps one per caller and scope. */
const refs = new WeakMap<EdgeLimiter, Map<string, LeaseRef>>();
function refOf(limiter: EdgeLimiter, key: string): LeaseRef {
  let byKey = refs.get(limiter);
  if (!byKey) refs.set(limiter, (byKey = new Map()));
  let ref = byKey.get(key);
  if (!ref) byKey.set(key, (ref = leaseRef(key)));
  return ref;
}

async function decide(limiter: EdgeLimiter, key: string, ctx: ReserveContext, ref = refOf(limiter, key)) {
  return limiter.tryLocal(ref, ctx.applied.limit) ?? (await limiter.acquire(ref, ctx));
}

describe('edge limiter', () => {
  it('sizes leases: a tenth of the window (50 ms to 5 s) and a tenth of the limit (at least the waiting requests)', () => {
    expect(leaseMsFor({ max_requests: 1, window_seconds: 60 })).toBe(5000);
    expect(leaseMsFor({ max_requests: 1, window_seconds: 10 })).toBe(1000);
    expect(leaseMsFor({ max_requests: 1, window_seconds: 1 })).toBe(100);
    // Roomy (the window at most half full): half the window, at most 30 s.
    expect(leaseMsFor({ max_requests: 1, window_seconds: 60 }, true)).toBe(30_000);
    expect(leaseMsFor({ max_requests: 1, window_seconds: 3600 }, true)).toBe(30_000);
    expect(leaseMsFor({ max_requests: 1, window_seconds: 10 }, true)).toBe(5_000);
    expect(leaseMsFor({ max_requests: 1, window_seconds: 1 }, true)).toBe(500);
    expect(isRoomy({ max_requests: 10, window_seconds: 60 }, 5)).toBe(true);
    expect(isRoomy({ max_requests: 10, window_seconds: 60 }, 4)).toBe(false);
    expect(isRoomy({ max_requests: 1, window_seconds: 60 }, 0)).toBe(false);
    expect(leaseWantFor({ max_requests: 3, window_seconds: 60 }, 0)).toBe(1);
    expect(leaseWantFor({ max_requests: 1000, window_seconds: 60 }, 0)).toBe(100);
    expect(leaseWantFor({ max_requests: 3, window_seconds: 60 }, 10)).toBe(3);
  });

  it('20 concurrent requests against a limit of 3: exactly 3 admitted, on one node', async () => {
    const clock = new ManualClock(0);
    const actors = new FakeActors(clock);
    const limiter = new EdgeLimiter(actors, clock, settings);
    const decisions = await Promise.all(Array.from({ length: 20 }, () => decide(limiter, 'k', context(3))));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(3);
    expect(decisions.filter((d) => !d.allowed).every((d) => d.retry_after_seconds >= 1)).toBe(true);
    // Refusals are remembered: more requests send nothing.
    const before = actors.asks;
    for (let i = 0; i < 100; i++) expect((await decide(limiter, 'k', context(3))).allowed).toBe(false);
    expect(actors.asks).toBe(before);
  });

  it('20 concurrent requests through 4 nodes sharing the window actor: exactly the limit admitted', async () => {
    for (const max of [1, 3, 7, 20]) {
      const clock = new ManualClock(0);
      const actors = new FakeActors(clock);
      const nodes = Array.from({ length: 4 }, () => new EdgeLimiter(actors, clock, settings));
      const decisions = await Promise.all(Array.from({ length: 20 }, (_, i) => decide(nodes[i % 4]!, 'k', context(max))));
      expect(decisions.filter((d) => d.allowed), `limit ${max}`).toHaveLength(Math.min(max, 20));
    }
  });

  it('spends leases locally: one reserve per lease, not per request', async () => {
    const clock = new ManualClock(0);
    const actors = new FakeActors(clock);
    const limiter = new EdgeLimiter(actors, clock, settings);
    for (let i = 0; i < 1000; i++) expect((await decide(limiter, 'k', context(10_000))).allowed).toBe(true);
    expect(limiter.counts.reserves).toBe(1);
    clock.advance(5_000); // the lease ended: the next request renews it, giving back what is left
    expect((await decide(limiter, 'k', context(10_000))).allowed).toBe(true);
    expect(limiter.counts.reserves).toBe(2);
  });

  it('leases of a caller far below its limit live 30 s; past half the limit they are short again', async () => {
    const clock = new ManualClock(0);
    const actors = new FakeActors(clock);
    const limiter = new EdgeLimiter(actors, clock, settings);
    const lastUntil = () => Math.max(...(actors.windows.get([...actors.windows.keys()][0]!)!.entries.map((entry) => entry.until_ms)));
    // The first lease is short (nothing known of the window yet): it ends by time after 5 s.
    expect((await decide(limiter, 'k', context(10_000))).allowed).toBe(true);
    expect(lastUntil()).toBe(5_000 + 60_000);
    clock.advance(5_000);
    expect((await decide(limiter, 'k', context(10_000))).allowed).toBe(true);
    expect(limiter.counts.reserves).toBe(2);
    expect(lastUntil()).toBe(5_000 + 30_000 + 60_000);
    // 25 s later the roomy lease still has tokens and time: no reserve.
    clock.advance(25_000);
    for (let i = 0; i < 100; i++) expect((await decide(limiter, 'k', context(10_000))).allowed).toBe(true);
    expect(limiter.counts.reserves).toBe(2);

    // A limit of 10 (leases of 1 token): once a reserve leaves fewer than 5 free, the next lease is short.
    const tight = context(10, 60, 'tight');
    for (let i = 0; i < 7; i++) expect((await decide(limiter, 'tight', tight)).allowed).toBe(true);
    // Tokens of leases ending 5 s from now (their entries count until then + the window).
    const shortLeased = () =>
      actors.windows
        .get([...actors.windows.keys()].find((key) => key.includes('tight'))!)!
        .entries.filter((entry) => entry.until_ms === clock.now() + 5_000 + 60_000)
        .reduce((sum, entry) => sum + entry.count, 0);
    // 5 s: the 1st lease (nothing known yet) and the 7th (the 6th reserve left 4 free, under half); the 2nd to 6th, 30 s.
    expect(shortLeased()).toBe(2);
    expect((await decide(limiter, 'tight', tight)).allowed).toBe(true);
    expect(shortLeased()).toBe(3);
  });

  it('gives the window back after the window: the caller is admitted again; the sweep forgets idle windows', async () => {
    const clock = new ManualClock(0);
    const actors = new FakeActors(clock);
    const limiter = new EdgeLimiter(actors, clock, settings);
    expect((await decide(limiter, 'k', context(1, 10))).allowed).toBe(true);
    const refused = await decide(limiter, 'k', context(1, 10));
    expect(refused.allowed).toBe(false);
    expect(refused.retry_after_seconds).toBe(11);
    clock.advance(11_000);
    expect((await decide(limiter, 'k', context(1, 10))).allowed).toBe(true);
    clock.advance(30_000);
    expect(limiter.sweep()).toBe(1);
    await new Promise((resolve) => setImmediate(resolve));
    expect([...actors.windows.values()]).toEqual([null]);
  });

  it('a ref reaches the lease of its key whatever happened to the lease: refs made apart, a sweep, a cache/clear mid-reserve', async () => {
    const clock = new ManualClock(0);
    const actors = new FakeActors(clock);
    const limiter = new EdgeLimiter(actors, clock, settings);
    const ctx = context(100, 10); // leases of 10 tokens
    const kept = refOf(limiter, 'k');
    expect((await decide(limiter, 'k', ctx, kept)).allowed).toBe(true);
    // Another ref of the same key (the plugin's cache started again) spends the same lease: no reserve.
    const other = leaseRef('k');
    for (let i = 0; i < 9; i++) expect((await decide(limiter, 'k', ctx, other)).allowed).toBe(true);
    expect(limiter.counts.reserves).toBe(1);
    // The lease's ten tokens are spent, whichever ref spent them.
    expect(limiter.tryLocal(kept, ctx.applied.limit)).toBeNull();
    // Swept: the kept ref's lease left the table, and its next request reserves a new one.
    clock.advance(60_000);
    expect(limiter.sweep()).toBe(1);
    expect(limiter.tryLocal(kept, ctx.applied.limit)).toBeNull();
    expect((await decide(limiter, 'k', ctx, kept)).allowed).toBe(true);
    expect(limiter.counts.reserves).toBe(2);
    expect(limiter.leaseCount()).toBe(1);
    expect(limiter.tryLocal(other, ctx.applied.limit)?.allowed).toBe(true);

    // cache/clear while a reserve is in flight, and a new lease for the key meanwhile: the late grant
    // goes back to its window, and the key keeps one lease, which both requests spend.
    clock.advance(60_000);
    const late = decide(limiter, 'k', ctx, kept);
    limiter.clear();
    const fresh = decide(limiter, 'k', ctx, leaseRef('k'));
    expect((await late).allowed).toBe(true);
    expect((await fresh).allowed).toBe(true);
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(limiter.counts.reserves).toBe(4);
    expect(limiter.leaseCount()).toBe(1);
    const counted = [...actors.windows.values()][0]!.entries.filter((entry) => entry.until_ms > clock.now()).reduce((sum, entry) => sum + entry.count, 0);
    expect(counted).toBe(10);
    for (let i = 0; i < 8; i++) expect(limiter.tryLocal(kept, ctx.applied.limit)?.allowed).toBe(true);
    expect(limiter.tryLocal(kept, ctx.applied.limit)).toBeNull();
  });

  it('fails open when the window actor cannot answer', async () => {
    const clock = new ManualClock(0);
    const failing: ActorClient = { ask: async () => Promise.reject(new Error('partition unavailable')), tell: () => {} };
    const errors: unknown[] = [];
    const limiter = new EdgeLimiter(failing, clock, settings, (error) => errors.push(error));
    expect((await decide(limiter, 'k', context(1))).allowed).toBe(true);
    expect(limiter.counts.failedOpen).toBe(1);
    expect(errors).toHaveLength(1);
    // Concurrent requests waiting on a failing reserve are admitted too, none rejected.
    const concurrent = await Promise.all(Array.from({ length: 10 }, () => decide(limiter, 'k2', context(1))));
    expect(concurrent.every((d) => d.allowed)).toBe(true);
  });

  it('a failed check of a stale rule set keeps the stale rules and reports the error (never an unhandled rejection)', async () => {
    const clock = new ManualClock(0);
    const actors = new FakeActors(clock);
    const errors: unknown[] = [];
    let failing = false;
    const flaky: ActorClient = {
      ask: (kind, key, message, options) => (failing ? Promise.reject(new Error('partition unavailable')) : actors.ask(kind, key, message)),
      tell: (kind, key, message) => actors.tell(kind, key, message),
    };
    const limiter = new EdgeLimiter(flaky, clock, settings, (error) => errors.push(error));
    const first = await limiter.currentRules();
    failing = true;
    clock.advance(2_000);
    expect(limiter.currentRules()).toBe(first);
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(errors).toHaveLength(1);
  });

  it('caches the rule set: fresh answers synchronously, a change through this node or a new epoch is seen', async () => {
    const clock = new ManualClock(0);
    const actors = new FakeActors(clock);
    const limiter = new EdgeLimiter(actors, clock, settings);
    const first = await limiter.currentRules();
    expect(first.version).toBe(0);
    expect(limiter.currentRules()).toBe(first);
    stepRules(actors.rules, { op: 'put_default', limit: { max_requests: 5, window_seconds: 5 } }, fixedContext(0));
    expect(limiter.currentRules()).toBe(first); // within the cache time
    limiter.rulesChanged();
    expect((await limiter.currentRules()).default_tier).toEqual({ max_requests: 5, window_seconds: 5 });
    // Another node's cache/clear: seen within the cache time, and the leases go.
    expect((await decide(limiter, 'k', context(1))).allowed).toBe(true);
    expect(limiter.leaseCount()).toBe(1);
    stepRules(actors.rules, { op: 'clear_cache' }, fixedContext(0));
    clock.advance(1_000);
    expect(limiter.currentRules()).not.toBeInstanceOf(Promise); // stale while it checks
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(limiter.leaseCount()).toBe(0);
  });
});

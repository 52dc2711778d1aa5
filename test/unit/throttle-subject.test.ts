import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { THROTTLE_STATS_KIND, throttleStatsKey, throttleSubjectKey, type CheckView, type PlanRule, type RefundView, type SubjectMessage } from '../../actors/throttle/messages.js';
import { FLUSH_ALARM, initialSubject, stepSubject, type SubjectState } from '../../actors/throttle/subject-state.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** The subject actor's step: check, peek, refund, reset, the newest rule, the stats flush (actors/throttle/subject-state.ts). */
const T0 = 1_750_000_000_000;
const KEY = throttleSubjectKey('tenant-1', 'api', 3, 'user:1');
const rule = (overrides: Partial<PlanRule> = {}): PlanRule => ({ version: 3, max_requests: 3, window_ms: 60_000, refund_window_ms: 10_000, ...overrides });

function run(state: SubjectState | null, message: SubjectMessage | { op: '$alarm'; name: string; due_ms: number }, now = T0) {
  return stepSubject(state, message, fixedContext(now, 'throttle-subject', KEY));
}

function checks(count: number, r = rule(), now = T0, start: SubjectState | null = initialSubject()) {
  let state = start;
  const views: CheckView[] = [];
  for (let i = 0; i < count; i++) {
    const result = run(state, { op: 'check', rule: r, cost: 1 }, now);
    state = result.state;
    views.push(result.reply as CheckView);
  }
  return { state: state!, views };
}

describe('throttle subject', () => {
  it('check consumes and answers the bucket; past the limit it denies with retry_after', () => {
    const { views, state } = checks(4);
    expect(views.map((v) => v.allowed)).toEqual([true, true, true, false]);
    expect(views.map((v) => v.remaining)).toEqual([2, 1, 0, 0]);
    expect(views[0]).toMatchObject({ limit: 3, reason: 'within_limit', retry_after_seconds: 0, reset_after_seconds: 20, reset_at: Math.ceil((T0 + 20_000) / 1000) });
    expect(views[3]).toMatchObject({ reason: 'limit_exceeded', retry_after_seconds: 20, reset_after_seconds: 60 });
    expect(state.pending).toEqual({ total_checks: 4, total_allowed: 3, total_denied: 1, total_refunded: 0 });
    expect(new Set(views.map((v) => v.consume_token)).size).toBe(4);
  });

  it('sets the flush alarm once, and the flush sends the counts to the plan generation\'s stats', () => {
    const first = run(null, { op: 'check', rule: rule(), cost: 1 });
    expect(first.alarms).toEqual([{ name: FLUSH_ALARM, due_ms: T0 + 1_000 }]);
    const second = run(first.state, { op: 'check', rule: rule(), cost: 1 }, T0 + 10);
    expect(second.alarms).toBeUndefined();
    const flushed = run(second.state, { op: '$alarm', name: FLUSH_ALARM, due_ms: T0 + 1_000 }, T0 + 1_000);
    expect(flushed.sends).toEqual([
      { kind: THROTTLE_STATS_KIND, key: throttleStatsKey('tenant-1', 'api', 3), message: { op: 'add', counts: { total_checks: 2, total_allowed: 2, total_denied: 0, total_refunded: 0 } } },
    ]);
    expect(flushed.state!.pending.total_checks).toBe(0);
    // Not idle yet (the bucket refills until T0 + 40 s): the alarm waits for that, then the record goes.
    const due = flushed.alarms![0].due_ms!;
    expect(due).toBeGreaterThan(T0 + 1_000);
    const idle = run(flushed.state, { op: '$alarm', name: FLUSH_ALARM, due_ms: due }, due);
    expect(idle.state).toBeNull();
    expect(idle.sends).toEqual([]);
  });

  it('peek never consumes nor stores anything', () => {
    const { state } = checks(2);
    const peeked = run(state, { op: 'peek', rule: rule() });
    expect(peeked.state).toBe(state);
    expect(peeked.reply).toEqual({ limit: 3, remaining: 1, reset_after_seconds: 40, reset_at: Math.ceil((T0 + 40_000) / 1000), window_seconds: 60 });
    expect(run(null, { op: 'peek', rule: rule() }).state).toBeNull();
  });

  it('reset fills the bucket', () => {
    const { state } = checks(3);
    const reset = run(state, { op: 'reset', rule: rule() }, T0 + 5);
    expect((run(reset.state, { op: 'peek', rule: rule() }, T0 + 5).reply as CheckView).remaining).toBe(3);
  });

  it('refund: once per token, within the window, never for a denied check, never a forged token', () => {
    const { state, views } = checks(4);
    const refund = (s: SubjectState, consume_token: string, now = T0 + 1) => run(s, { op: 'refund', rule: rule(), consume_token }, now);
    const first = refund(state, views[0].consume_token);
    expect(first.reply).toEqual({ refunded: true, cost_refunded: 1, reason: 'refunded' });
    expect((run(first.state, { op: 'peek', rule: rule() }, T0 + 1).reply as CheckView).remaining).toBe(1);
    expect(refund(first.state!, views[0].consume_token).reply).toEqual({ refunded: false, cost_refunded: 0, reason: 'already_refunded' });
    expect(refund(first.state!, views[3].consume_token).reply).toMatchObject({ refunded: false, reason: 'nothing_consumed' });
    // The window is 10 s after the check: at T0 + 10 s yes, 1 ms later no.
    expect(refund(first.state!, views[1].consume_token, T0 + 10_000).reply).toMatchObject({ refunded: true });
    expect(refund(first.state!, views[1].consume_token, T0 + 10_001).reply).toMatchObject({ refunded: false, reason: 'refund_window_passed' });
    expect(first.state!.pending.total_refunded).toBe(1);
    // A token with its cost raised fails its signature; garbage is not a token.
    const [head, mac] = [views[1].consume_token.slice(0, views[1].consume_token.lastIndexOf('.')), views[1].consume_token.slice(views[1].consume_token.lastIndexOf('.'))];
    const parts = head.split('.');
    parts[1] = '3';
    expect(codeOf(() => refund(first.state!, parts.join('.') + mac))).toBe('throttle_consume_token_invalid');
    expect(codeOf(() => refund(first.state!, 'not-a-token'))).toBe('throttle_consume_token_invalid');
    // Another subject's token (another secret) is refused too.
    const other = checks(1).views[0].consume_token;
    expect(codeOf(() => refund(first.state!, other))).toBe('throttle_consume_token_invalid');
  });

  it('a refund window of 0 makes tokens refundable only at the instant of the check', () => {
    const r = rule({ refund_window_ms: 0 });
    const { state, views } = checks(1, r);
    expect(run(state, { op: 'refund', rule: r, consume_token: views[0].consume_token }, T0 + 1).reply).toMatchObject({ refunded: false, reason: 'refund_window_passed' });
  });

  it('keeps the newest rule: an older version from a stale node does not bring back an old limit', () => {
    const { state } = checks(1, rule({ version: 5, max_requests: 1 }));
    const stale = run(state, { op: 'check', rule: rule({ version: 4, max_requests: 100 }), cost: 1 });
    expect(stale.reply).toMatchObject({ allowed: false, limit: 1 });
    const newer = run(state, { op: 'check', rule: rule({ version: 6, max_requests: 100, window_ms: 100_000 }), cost: 1 });
    expect(newer.reply).toMatchObject({ allowed: true, limit: 100 });
  });

  it('refuses a cost larger than the bucket', () => {
    expect(codeOf(() => run(null, { op: 'check', rule: rule(), cost: 4 }))).toBe('throttle_cost_exceeds_limit');
  });

  it('property: concurrent callers of one subject, in any interleaving, get exactly the units the bucket holds', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.array(fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 20 }), { minLength: 1, maxLength: 10 }),
        fc.infiniteStream(fc.nat()),
        (max_requests, callers, picks) => {
          // Every caller's checks queue in the actor's mailbox in some interleaving; one turn each.
          const r = rule({ max_requests, window_ms: 3_600_000 });
          const queues = callers.map((costs) => costs.map((cost) => Math.min(cost, max_requests)));
          const iterator = picks[Symbol.iterator]();
          let state: SubjectState | null = null;
          let consumed = 0;
          let allowedChecks = 0;
          let totalChecks = 0;
          const tokens: string[] = [];
          while (queues.some((queue) => queue.length > 0)) {
            const open = queues.filter((queue) => queue.length > 0);
            const queue = open[iterator.next().value % open.length];
            const cost = queue.shift()!;
            const before = state ? (run(state, { op: 'peek', rule: r }).reply as CheckView).remaining : max_requests;
            const result = run(state, { op: 'check', rule: r, cost });
            const view = result.reply as CheckView;
            state = result.state;
            totalChecks++;
            expect(view.allowed).toBe(cost <= before);
            if (view.allowed) {
              consumed += cost;
              allowedChecks++;
              tokens.push(view.consume_token);
            }
          }
          expect(consumed).toBeLessThanOrEqual(max_requests);
          expect(state!.pending).toMatchObject({ total_checks: totalChecks, total_allowed: allowedChecks, total_denied: totalChecks - allowedChecks });
          // Refunding every token twice gives each back once: the bucket is full again, exactly.
          let refundedUnits = 0;
          for (const token of [...tokens, ...tokens]) {
            const result = run(state, { op: 'refund', rule: r, consume_token: token }, T0 + 1);
            state = result.state;
            refundedUnits += (result.reply as RefundView).cost_refunded;
          }
          expect(refundedUnits).toBe(consumed);
          expect((run(state, { op: 'peek', rule: r }, T0 + 1).reply as CheckView).remaining).toBe(max_requests);
        },
      ),
      { numRuns: 200 },
    );
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ReserveReply, WindowMessage } from '../../actors/rate-limits/messages.js';
import { nextFreeAt, stepWindow, usedAt, type WindowStateOrNone } from '../../actors/rate-limits/window-state.js';
import { fixedContext } from '../helpers/step.js';

/** The window actor's sliding window of leases, pure (actors/rate-limits/window-state.ts). */

const caller = { id: 'user:u1', tenant: 'u1', user_id: 'u1' };
const reserveMessage = (want: number, max: number, window_seconds: number, lease_ms: number, give_back?: { lease_id: string; unused: number }): WindowMessage => ({
  op: 'reserve',
  want,
  limit: { max_requests: max, window_seconds },
  lease_ms,
  ...(give_back ? { give_back } : {}),
  caller,
  policy: 'default',
  endpoint: '/api/v1/x',
  method: 'GET',
});

function reserve(state: WindowStateOrNone, now: number, message: WindowMessage) {
  const result = stepWindow(state, message, fixedContext(now, 'rate-limit-window', 'k'));
  return { state: result.state, reply: result.reply as ReserveReply, result };
}

describe('window: grants and refusals', () => {
  it('grants up to the limit, then refuses with the time the window next has room', () => {
    let state: WindowStateOrNone = null;
    const a = reserve(state, 0, reserveMessage(2, 3, 10, 1));
    expect(a.reply).toMatchObject({ granted: 2, remaining: 1, retry_at_ms: 0 });
    state = a.state;
    const b = reserve(state, 5, reserveMessage(5, 3, 10, 1));
    // Partial grant: what is left.
    expect(b.reply).toMatchObject({ granted: 1, remaining: 0 });
    expect(b.reply.retry_at_ms).toBe(10_001); // the first lease's tokens count until lease end (1) + window (10 s)
    state = b.state;
    const c = reserve(state, 6, reserveMessage(1, 3, 10, 1));
    expect(c.reply).toMatchObject({ granted: 0, lease_id: null, remaining: 0, retry_at_ms: 10_001 });
  });

  it('is exact at the window edge: a token counts until lease end + window, and not a millisecond longer', () => {
    let state: WindowStateOrNone = reserve(null, 1_000, reserveMessage(3, 3, 10, 1)).state;
    // Lease end 1_001, so the three tokens count until 11_001.
    expect(reserve(state, 11_000, reserveMessage(1, 3, 10, 1)).reply.granted).toBe(0);
    const edge = reserve(state, 11_001, reserveMessage(3, 3, 10, 1));
    expect(edge.reply.granted).toBe(3);
    state = edge.state;
    expect(usedAt(state!.entries, 11_001)).toBe(3);
  });

  it('takes back the unspent tokens of a lease', () => {
    let state: WindowStateOrNone = null;
    const first = reserve(state, 0, reserveMessage(3, 3, 60, 1000));
    state = first.state;
    expect(reserve(state, 10, reserveMessage(1, 3, 60, 1000)).reply.granted).toBe(0);
    // One token spent, two given back with the next reserve: two can be granted again.
    const again = reserve(state, 1_500, reserveMessage(3, 3, 60, 1000, { lease_id: first.reply.lease_id!, unused: 2 }));
    expect(again.reply.granted).toBe(2);
    // A give_back told on its own (the node dropping its leases) works the same.
    const told = stepWindow(again.state, { op: 'give_back', lease_id: again.reply.lease_id!, unused: 2 }, fixedContext(1_600));
    expect(usedAt(told.state!.entries, 1_600)).toBe(1);
  });

  it('follows a lowered limit at once: nothing is granted until the count is under the new one', () => {
    const state = reserve(null, 0, reserveMessage(10, 10, 60, 1)).state;
    const lowered = reserve(state, 1, reserveMessage(1, 5, 60, 1));
    expect(lowered.reply.granted).toBe(0);
    expect(lowered.reply.retry_at_ms).toBe(60_001);
  });

  it('publishes rate_limit.exceeded once per caller and window, to the tenant\'s webhooks', () => {
    let state: WindowStateOrNone = reserve(null, 0, reserveMessage(1, 1, 60, 1)).state;
    const first = reserve(state, 10, reserveMessage(1, 1, 60, 1));
    expect(first.result.events).toEqual([expect.objectContaining({ type: 'rate_limit.exceeded' })]);
    expect(first.result.sends).toHaveLength(1);
    expect(first.result.sends![0]).toMatchObject({ kind: 'webhook-subscriptions', message: { op: 'publish', event: { type: 'rate_limit.exceeded' } } });
    state = first.state;
    for (const now of [11, 30_000, 60_000]) {
      const again = reserve(state, now, reserveMessage(1, 1, 60, 1));
      expect(again.reply.granted).toBe(0);
      expect(again.result.events).toEqual([]);
      state = again.state;
    }
    // The token expires (lease end 1 + 60 s): granted, no event.
    const granted = reserve(state, 60_001, reserveMessage(1, 1, 60, 1));
    expect(granted.reply.granted).toBe(1);
    expect(granted.result.events).toEqual([]);
    // Refused again once the notice's window (first refusal at 10 + 60 s) is over: a new event.
    const later = reserve(granted.state, 60_010, reserveMessage(1, 1, 60, 1));
    expect(later.reply.granted).toBe(0);
    expect(later.result.events).toHaveLength(1);
  });

  it('an anonymous caller\'s breach goes to the event bus only', () => {
    const state = reserve(null, 0, reserveMessage(1, 1, 60, 1)).state;
    const anonymous: WindowMessage = { ...(reserveMessage(1, 1, 60, 1) as Extract<WindowMessage, { op: 'reserve' }>), caller: { id: 'address:10.0.0.1', tenant: null, user_id: null } };
    const result = stepWindow(state, anonymous, fixedContext(5));
    expect(result.events).toHaveLength(1);
    expect(result.sends).toEqual([]);
  });

  it('forget deletes the record only once nothing in it counts', () => {
    const state = reserve(null, 0, reserveMessage(1, 5, 10, 1)).state;
    expect(stepWindow(state, { op: 'forget' }, fixedContext(5_000)).state).not.toBeNull();
    expect(stepWindow(state, { op: 'forget' }, fixedContext(10_001)).state).toBeNull();
  });

  it('refuses malformed reserves (never from the edge, but never a defect either)', () => {
    expect(() => reserve(null, 0, reserveMessage(0, 3, 10, 1))).toThrow();
    expect(() => reserve(null, 0, reserveMessage(1, 0, 10, 1))).toThrow();
    expect(() => reserve(null, 0, reserveMessage(1, 3, 0, 1))).toThrow();
    expect(() => reserve(null, 0, reserveMessage(1, 3, 10, 0))).toThrow();
  });

  it('keeps a bounded number of entries, merging the oldest conservatively', () => {
    let state: WindowStateOrNone = null;
    for (let i = 0; i < 400; i++) state = reserve(state, i, reserveMessage(1, 1_000, 60, 1)).state;
    expect(state!.entries.length).toBeLessThanOrEqual(256);
    expect(usedAt(state!.entries, 400)).toBe(400);
    expect(nextFreeAt(state!.entries, 400, 400)).toBeGreaterThan(400);
  });
});

/**
 * Several nodes share one caller's window: each reserves leases, spends them
 * locally, gives back what is left. Whatever the interleaving, no interval of
 * one window holds more admitted requests than the limit.
 */
describe('window: exact under concurrency (property)', () => {
  interface NodeLease {
    lease_id: string | null;
    tokens: number;
    lease_end: number;
  }

  it('never admits more than max_requests in any window, across nodes, leases and give-backs', () => {
    const step = fc.record({
      node: fc.integer({ min: 0, max: 3 }),
      dt: fc.integer({ min: 0, max: 700 }),
      want: fc.integer({ min: 1, max: 6 }),
      give_back: fc.boolean(),
    });
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 1_500 }),
        fc.array(step, { minLength: 1, maxLength: 300 }),
        (max, window_seconds, lease_ms, steps) => {
          const window_ms = window_seconds * 1000;
          let state: WindowStateOrNone = null;
          let now = 0;
          const nodes: NodeLease[] = Array.from({ length: 4 }, () => ({ lease_id: null, tokens: 0, lease_end: 0 }));
          const admitted: number[] = [];
          for (const { node: n, dt, want, give_back } of steps) {
            now += dt;
            const node = nodes[n]!;
            if (node.tokens > 0 && now < node.lease_end) {
              node.tokens--;
              admitted.push(now);
              continue;
            }
            if (give_back && node.lease_id && node.tokens > 0) {
              state = stepWindow(state, { op: 'give_back', lease_id: node.lease_id, unused: node.tokens }, fixedContext(now)).state;
              node.tokens = 0;
              node.lease_id = null;
            }
            const back = node.lease_id && node.tokens > 0 ? { lease_id: node.lease_id, unused: node.tokens } : undefined;
            const { state: next, reply } = reserve(state, now, reserveMessage(want, max, window_seconds, lease_ms, back));
            state = next;
            node.lease_id = reply.lease_id;
            node.tokens = reply.granted;
            node.lease_end = now + lease_ms;
            if (node.tokens > 0) {
              node.tokens--;
              admitted.push(now);
            }
          }
          for (let i = 0; i < admitted.length; i++) {
            let inWindow = 0;
            for (let j = i; j < admitted.length && admitted[j]! < admitted[i]! + window_ms; j++) inWindow++;
            if (inWindow > max) return false;
          }
          return true;
        },
      ),
      { numRuns: 300 },
    );
  });

  it('one node alone, spending every lease, gets its whole limit in each window (no starvation)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 10 }), (max, window_seconds) => {
        let state: WindowStateOrNone = null;
        let now = 0;
        let admitted = 0;
        // Requests arriving faster than the limit, one window long, starting on an idle window.
        while (admitted < max) {
          const { state: next, reply } = reserve(state, now, reserveMessage(1, max, window_seconds, 50));
          state = next;
          if (reply.granted === 0) return false;
          admitted++;
          now += 1;
        }
        return reserve(state, now, reserveMessage(1, max, window_seconds, 50)).reply.granted === 0;
      }),
    );
  });
});

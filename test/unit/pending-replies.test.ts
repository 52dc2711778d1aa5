import { describe, expect, it } from 'vitest';
import { PendingReplies, type Waiter } from '../../cluster/transport/pending-replies.js';

const waiter = (sent_ms: number, tag: number): Waiter & { tag: number } => ({ resolve: () => undefined, reject: () => undefined, sent_ms, tag });

describe('PendingReplies', () => {
  it('behaves as a map of id -> waiter under random adds, takes (in and out of order), sweeps and unknown ids', () => {
    let state = 11;
    const random = () => ((state = (state * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
    const pending = new PendingReplies();
    const model = new Map<number, Waiter & { tag: number }>();
    let clock = 0;
    for (let step = 0; step < 60_000; step++) {
      const pick = random();
      if (pick < 0.5 || model.size === 0) {
        const w = waiter(clock++, step);
        const id = pending.add(w);
        expect(model.has(id)).toBe(false);
        model.set(id, w);
      } else if (pick < 0.98) {
        // Mostly the oldest few (replies nearly in order), sometimes any, sometimes one never handed out.
        const ids = [...model.keys()];
        const id = pick < 0.9 ? ids[Math.floor(random() * Math.min(8, ids.length))] : pick < 0.97 ? ids[Math.floor(random() * ids.length)] : -5;
        expect(pending.take(id)).toBe(model.get(id));
        model.delete(id);
      } else {
        const cutoff = clock - 2_000;
        const expired = pending.takeSentBefore(cutoff).map((w) => (w as Waiter & { tag: number }).tag).sort((a, b) => a - b);
        const expected = [...model].filter(([, w]) => w.sent_ms <= cutoff);
        for (const [id] of expected) model.delete(id);
        expect(expired).toEqual(expected.map(([, w]) => w.tag).sort((a, b) => a - b));
      }
      expect(pending.size).toBe(model.size);
    }
    const rest = pending.takeAll().map((w) => (w as Waiter & { tag: number }).tag).sort((a, b) => a - b);
    expect(rest).toEqual([...model.values()].map((w) => w.tag).sort((a, b) => a - b));
    expect(pending.size).toBe(0);
  });

  it('keeps a waiter that stays while 200,000 newer ones come and go (past the ring: moved aside, not lost)', () => {
    const pending = new PendingReplies();
    const slow = waiter(0, -1);
    const slowId = pending.add(slow);
    for (let i = 1; i <= 200_000; i++) {
      const id = pending.add(waiter(i, i));
      expect(pending.take(id)).toBeDefined();
    }
    expect(pending.size).toBe(1);
    expect(pending.take(slowId)).toBe(slow);
    expect(pending.take(slowId)).toBeUndefined();
    expect(pending.size).toBe(0);
  });

  it('a sweep takes an old waiter moved aside, and stops at the first young one in the ring', () => {
    const pending = new PendingReplies();
    const slowId = pending.add(waiter(0, 0));
    let last = 0;
    for (let i = 1; i <= 70_000; i++) last = pending.add(waiter(i, i));
    // Every one sent at or before 100: the slow one (moved aside past the ring's span) and 1..100.
    const expired = pending.takeSentBefore(100);
    expect(expired.map((w) => w.sent_ms).sort((a, b) => a - b)).toEqual(Array.from({ length: 101 }, (_, i) => i));
    expect(pending.take(slowId)).toBeUndefined();
    expect(pending.take(last)?.sent_ms).toBe(70_000);
    expect(pending.size).toBe(70_000 - 100 - 1);
  });
});

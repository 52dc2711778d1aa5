import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { consume, FULL_BUCKET, msUntilFits, msUntilFull, refund, remaining, rescaled, type Bucket, type Limit } from '../../actors/throttle/gcra.js';

/** The throttle's GCRA, exact in integers (actors/throttle/gcra.ts). */
const T0 = 1_750_000_000_000;

function take(bucket: Bucket, limit: Limit, cost: number, now: number): { bucket: Bucket; allowed: boolean } {
  const next = consume(bucket, limit, cost, now);
  return next ? { bucket: next, allowed: true } : { bucket, allowed: false };
}

describe('throttle GCRA', () => {
  it('a full bucket passes exactly max_requests at one instant, then nothing', () => {
    const limit = { max_requests: 5, window_ms: 60_000 };
    let bucket = FULL_BUCKET;
    const outcomes: boolean[] = [];
    for (let i = 0; i < 8; i++) {
      const result = take(bucket, limit, 1, T0);
      bucket = result.bucket;
      outcomes.push(result.allowed);
    }
    expect(outcomes).toEqual([true, true, true, true, true, false, false, false]);
    expect(remaining(bucket, limit, T0)).toBe(0);
    expect(msUntilFull(bucket, T0)).toBe(60_000);
  });

  it('refills one unit every window/max_requests, to the millisecond (window edge)', () => {
    const limit = { max_requests: 4, window_ms: 1_000 };
    let bucket = FULL_BUCKET;
    for (let i = 0; i < 4; i++) bucket = consume(bucket, limit, 1, T0)!;
    // One unit every 250 ms: 1 ms before it is due, nothing; at the instant, exactly one.
    expect(consume(bucket, limit, 1, T0 + 249)).toBeNull();
    expect(msUntilFits(bucket, limit, 1, T0 + 249)).toBe(1);
    const next = consume(bucket, limit, 1, T0 + 250);
    expect(next).not.toBeNull();
    expect(consume(next!, limit, 1, T0 + 250)).toBeNull();
    // At the end of the window the bucket is full again, never more.
    expect(remaining(bucket, limit, T0 + 1_000)).toBe(4);
    expect(remaining(bucket, limit, T0 + 10_000)).toBe(4);
  });

  it('keeps fractional intervals exact: 7 per 60 s is 8571 3/7 ms per unit', () => {
    const limit = { max_requests: 7, window_ms: 60_000 };
    let bucket = FULL_BUCKET;
    for (let i = 0; i < 7; i++) bucket = consume(bucket, limit, 1, T0)!;
    expect(bucket).toEqual({ tat_ms: T0 + 60_000, tat_frac: 0 });
    // After 3 intervals (25714 2/7 ms) exactly 3 units are back: not at 25714 ms, yes at 25715.
    expect(remaining(bucket, limit, T0 + 25_714)).toBe(2);
    expect(remaining(bucket, limit, T0 + 25_715)).toBe(3);
    expect(msUntilFits(bucket, limit, 3, T0)).toBe(25_715);
  });

  it('a cost takes that many units at once, or none', () => {
    const limit = { max_requests: 10, window_ms: 10_000 };
    let bucket = consume(FULL_BUCKET, limit, 7, T0)!;
    expect(remaining(bucket, limit, T0)).toBe(3);
    expect(consume(bucket, limit, 4, T0)).toBeNull();
    bucket = consume(bucket, limit, 3, T0)!;
    expect(remaining(bucket, limit, T0)).toBe(0);
  });

  it('a refund gives units back, never above capacity', () => {
    const limit = { max_requests: 3, window_ms: 3_000 };
    let bucket = consume(FULL_BUCKET, limit, 3, T0)!;
    bucket = refund(bucket, limit, 2, T0);
    expect(remaining(bucket, limit, T0)).toBe(2);
    bucket = refund(bucket, limit, 3, T0);
    expect(remaining(bucket, limit, T0)).toBe(3);
    expect(msUntilFull(bucket, T0)).toBe(0);
  });

  it('a changed limit carries the units owed over: raised, the subject gets the difference; tightened, it waits', () => {
    const one = { max_requests: 1, window_ms: 3_600_000 };
    const five = { max_requests: 5, window_ms: 3_600_000 };
    const used = consume(FULL_BUCKET, one, 1, T0)!;
    expect(remaining(rescaled(used, one, five, T0), five, T0)).toBe(4);

    const from = { max_requests: 10, window_ms: 10_000 };
    const to = { max_requests: 2, window_ms: 10_000 };
    // 9 units owed, repaid at 1 per 5 s under the new limit.
    const bucket = rescaled(consume(FULL_BUCKET, from, 9, T0)!, from, to, T0);
    expect(remaining(bucket, to, T0)).toBe(0);
    expect(remaining(bucket, to, T0 + 34_999)).toBe(0);
    expect(remaining(bucket, to, T0 + 40_000)).toBe(1);
    expect(remaining(bucket, to, T0 + 45_000)).toBe(2);
    // Fractions round up, never in the client's favour.
    const seven = { max_requests: 7, window_ms: 60_000 };
    const odd = rescaled(consume(FULL_BUCKET, from, 1, T0)!, from, seven, T0);
    expect(remaining(odd, seven, T0)).toBe(6);
    expect(msUntilFull(odd, T0)).toBe(8_572);
  });

  it('property: in any interval of d ms at most max_requests + floor(d * max_requests / window_ms) units pass (the token bucket bound)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 5_000 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 1, max: 5 })), { minLength: 1, maxLength: 300 }),
        (max_requests, window_ms, arrivals) => {
          const limit = { max_requests, window_ms };
          let bucket = FULL_BUCKET;
          let now = T0;
          const passed: [number, number][] = [];
          for (const [gap, rawCost] of arrivals) {
            now += gap;
            const cost = Math.min(rawCost, max_requests);
            const result = take(bucket, limit, cost, now);
            bucket = result.bucket;
            if (result.allowed) passed.push([now, cost]);
          }
          for (let i = 0; i < passed.length; i++) {
            let units = 0;
            for (let j = i; j < passed.length; j++) {
              units += passed[j][1];
              const d = passed[j][0] - passed[i][0];
              expect(units).toBeLessThanOrEqual(max_requests + Math.floor((d * max_requests) / window_ms));
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('property: a request passes exactly when its cost <= remaining, and the long-run count is exact', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 200 }), fc.integer({ min: 1, max: 100_000 }), fc.integer({ min: 0, max: 20 }), (max_requests, window_ms, windows) => {
        const limit = { max_requests, window_ms };
        // Saturating callers at every millisecond-exact refill instant: after `windows` full windows
        // exactly max_requests * (windows + 1) units have passed.
        let bucket = FULL_BUCKET;
        let passed = 0;
        let mismatches = 0;
        for (let w = 0; w <= windows; w++) {
          const now = T0 + w * window_ms;
          for (;;) {
            const before = remaining(bucket, limit, now);
            const next = consume(bucket, limit, 1, now);
            if ((next !== null) !== before >= 1) mismatches++;
            if (!next) break;
            bucket = next;
            passed++;
          }
          if (passed > max_requests * (windows + 1)) break;
        }
        expect(mismatches).toBe(0);
        expect(passed).toBe(max_requests * (windows + 1));
      }),
      { numRuns: 50 },
    );
  });

  it('property: refunding what was consumed restores the bucket (capped at capacity)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1_000_000 }), fc.integer({ min: 1, max: 2_592_000_000 }), fc.integer({ min: 1, max: 1_000_000 }), (max_requests, window_ms, rawCost) => {
        const limit = { max_requests, window_ms };
        const cost = Math.min(rawCost, max_requests);
        const half = consume(FULL_BUCKET, limit, Math.floor(max_requests / 2), T0) ?? FULL_BUCKET;
        const before = remaining(half, limit, T0);
        const after = consume(half, limit, Math.min(cost, before), T0);
        if (!after) return;
        expect(remaining(refund(after, limit, Math.min(cost, before), T0), limit, T0)).toBe(before);
        expect(Number.isSafeInteger(after.tat_ms) && Number.isSafeInteger(after.tat_frac)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

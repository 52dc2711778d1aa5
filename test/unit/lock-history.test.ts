import { describe, expect, it } from 'vitest';
import { checkHistory, SLOW_MS, type LockHistory, type LockOp } from '../cluster/support/lock-history.js';

/**
 * The fault tests' history checker (test/cluster/support/lock-history.ts) on
 * hand-made histories: a clean one passes, and each property is caught when
 * violated, while the uncertain cases (unknown outcomes, expiry) are not
 * taken for violations.
 */
let ids = 0;
const TTL = 3_000;

function acquire(key: string, invoke: number, complete: number, lock_id: string, fence: number, extra: Partial<LockOp> = {}): LockOp {
  return { id: ids++, client: 'c0', kind: 'acquire', key, owner_id: `o-${lock_id}`, ttl_ms: TTL, node: 'n1', invoke_ms: invoke, complete_ms: complete, status: 200, result: { lock_id, fence_token: fence }, ...extra };
}
function release(of: LockOp, invoke: number, complete: number, extra: Partial<LockOp> = {}): LockOp {
  return { id: ids++, client: of.client, kind: 'release', key: of.key, owner_id: of.owner_id, lock_id: of.result!.lock_id!, of: of.id, node: 'n2', invoke_ms: invoke, complete_ms: complete, status: 204, ...extra };
}
function failedAcquire(key: string, invoke: number, complete: number, status: number, code?: string, extra: Partial<LockOp> = {}): LockOp {
  return { id: ids++, client: 'c1', kind: 'acquire', key, owner_id: `o-failed-${ids}`, ttl_ms: TTL, node: 'n1', invoke_ms: invoke, complete_ms: complete, status, code, retry_after: status === 503 ? '1' : null, ...extra };
}
function read(key: string, at: number, is_locked: boolean, lock_id: string | null, fence: number, owner_id: string | null = null): LockOp {
  return { id: ids++, client: 'readback', kind: 'read', key, node: 'n3', invoke_ms: at, complete_ms: at + 5, status: 200, result: { is_locked, lock_id, fence_token: fence, owner_id } };
}
function history(ops: LockOp[], extra: Partial<LockHistory> = {}): LockHistory {
  return { ops, node_faults: [], churn_keys: ['k'], load_start_ms: 0, load_end_ms: 100_000, fault: { label: 't', start_ms: 10_000, end_ms: 12_000 }, ...extra };
}

/** A correct run on key k: three acquisitions, each released, then one held to the end. */
function cleanOps(): LockOp[] {
  const a1 = acquire('k', 0, 10, 'L1', 1);
  const a2 = acquire('k', 30, 40, 'L2', 2);
  const a3 = acquire('k', 60, 70, 'L3', 3);
  const a4 = acquire('k', 90, 100, 'L4', 4);
  return [a1, release(a1, 20, 25), a2, release(a2, 50, 55), a3, release(a3, 80, 85), a4, read('k', 200, true, 'L4', 4, 'o-L4')];
}

describe('lock history checker', () => {
  it('passes a correct history', () => {
    const report = checkHistory(history(cleanOps()));
    expect(report.violations).toEqual([]);
    expect(report.counts.acquired).toBe(4);
    expect(report.counts.released).toBe(3);
    expect(report.counts.held_checked).toBe(1);
  });

  it('(a) catches an acknowledged acquisition missing at the read-back', () => {
    const ops = cleanOps();
    ops[ops.length - 1] = read('k', 200, true, 'L3', 3, 'o-L3');
    const report = checkHistory(history(ops));
    expect(report.lost_writes).toBeGreaterThan(0);
    expect(report.violations.some((v) => v.property === 'lost_write' && v.message.includes('L4'))).toBe(true);
  });

  it('(a) catches a fence token read back below an acknowledged one, and a key found free while held', () => {
    const ops = cleanOps();
    ops[ops.length - 1] = read('k', 200, false, null, 3);
    const report = checkHistory(history(ops));
    expect(report.violations.filter((v) => v.property === 'lost_write').map((v) => v.message)).toEqual([
      expect.stringContaining('below the acknowledged 4'),
      expect.stringContaining('the read-back shows the key free'),
    ]);
  });

  it('(a) catches a lost long-lived lock', () => {
    const long = acquire('long-1', 0, 10, 'LL', 1, { client: 'long', ttl_ms: 3_600_000 });
    const report = checkHistory(history([long, read('long-1', 50_000, false, null, 0)], { churn_keys: [] }));
    expect(report.lost_writes).toBe(2);
    const ok = checkHistory(history([long, read('long-1', 50_000, true, 'LL', 1, 'o-LL')], { churn_keys: [] }));
    expect(ok.violations).toEqual([]);
    expect(ok.counts.long_lived_checked).toBe(1);
  });

  it('(a) catches a release refused lock_not_held while its lock was certainly held, but not after its TTL', () => {
    const a = acquire('k', 0, 10, 'L1', 1);
    const lost = checkHistory(history([a, release(a, 100, 110, { status: 409, code: 'lock_not_held' })]));
    expect(lost.lost_writes).toBe(1);
    const expired = checkHistory(history([a, release(a, TTL + 100, TTL + 110, { status: 409, code: 'lock_not_held' })]));
    expect(expired.violations).toEqual([]);
  });

  it('(a) catches an acknowledged release that comes back', () => {
    const a = acquire('k', 0, 10, 'L1', 1);
    const report = checkHistory(history([a, release(a, 20, 25), read('k', 100, true, 'L1', 1, 'o-L1')]));
    expect(report.violations.map((v) => v.message)).toEqual([expect.stringContaining('was released')]);
  });

  it('(a) does not check a lock whose release has an unknown outcome, nor one that may have expired', () => {
    const a = acquire('k', 0, 10, 'L1', 1);
    const unknownRelease = checkHistory(history([a, release(a, 20, 2_000, { status: 0, error: 'timeout' }), read('k', 2_100, false, null, 1)], { node_faults: [{ node: 'n2', from_ms: 0, to_ms: 3_000 }] }));
    expect(unknownRelease.violations).toEqual([]);
    const expired = checkHistory(history([acquire('k', 0, 10, 'L1', 1), read('k', TTL + 10, false, null, 1)]));
    expect(expired.violations).toEqual([]);
  });

  it('(b) catches a fence token that goes back, and one given twice', () => {
    const a1 = acquire('k', 0, 10, 'L1', 5);
    const a2 = acquire('k', 30, 40, 'L2', 4);
    const report = checkHistory(history([a1, release(a1, 20, 25), a2, release(a2, 50, 55)]));
    expect(report.fence_regressions).toBe(1);
    const b2 = acquire('k', 30, 40, 'L2', 5);
    expect(checkHistory(history([a1, release(a1, 20, 25), b2, release(b2, 50, 55)])).fence_regressions).toBe(2);
  });

  it('(b) does not order acquisitions whose order is not certain (overlapping in time)', () => {
    // L2 was granted after L1 expired, but L1's reply was delayed (a paused entry node): acknowledged after L2.
    const a1 = acquire('k', 0, TTL + 500, 'L1', 1);
    const a2 = acquire('k', TTL + 100, TTL + 200, 'L2', 2);
    expect(checkHistory(history([a1, a2])).violations).toEqual([]);
  });

  it('(c) catches two holders of a key at once', () => {
    const a1 = acquire('k', 0, 10, 'L1', 1);
    const a2 = acquire('k', 20, 30, 'L2', 2);
    const report = checkHistory(history([a1, a2, release(a2, 40, 45), release(a1, 50, 55)]));
    expect(report.overlapping_holders).toBe(1);
    expect(report.violations[0].message).toContain('L1');
  });

  it('(c) counts a holder only until its release is invoked or its TTL can have run out', () => {
    const a1 = acquire('k', 0, 10, 'L1', 1);
    // Release invoked at 20, granted to L2 at 21..30 while the release's reply was still on its way.
    const a2 = acquire('k', 21, 30, 'L2', 2);
    expect(checkHistory(history([a1, release(a1, 20, 40), a2, release(a2, 50, 55)])).violations).toEqual([]);
    // Never released: free after its TTL.
    const b1 = acquire('k', 0, 10, 'L1', 1);
    const b2 = acquire('k', TTL + 10, TTL + 20, 'L2', 2);
    expect(checkHistory(history([b1, b2, release(b2, TTL + 30, TTL + 40)])).violations).toEqual([]);
  });

  it('(d) accepts documented refusals and catches the others', () => {
    const ok = [
      failedAcquire('k', 0, 5, 409, 'lock_held'),
      failedAcquire('k', 0, 5, 503, 'partition_unavailable'),
      failedAcquire('k', 0, 5, 503, 'not_enough_replicas'),
    ];
    expect(checkHistory(history(ok)).violations).toEqual([]);
    const bad = [
      failedAcquire('k', 0, 5, 500, 'internal_error'),
      failedAcquire('k', 0, 5, 503, 'partition_unavailable', { retry_after: null }),
      failedAcquire('k', 0, 5, 409, 'lock_not_held'),
      failedAcquire('k', 0, 5, 401, 'unauthorized'),
    ];
    expect(checkHistory(history(bad)).bad_refusals).toBe(4);
  });

  it('(d) accepts an unanswered request only from a killed or paused node', () => {
    const dropped = failedAcquire('k', 1_000, 1_100, 0, undefined, { error: 'ECONNREFUSED', node: 'n2' });
    expect(checkHistory(history([dropped])).bad_refusals).toBe(1);
    expect(checkHistory(history([dropped], { node_faults: [{ node: 'n2', from_ms: 1_050, to_ms: 5_000 }] })).bad_refusals).toBe(0);
    expect(checkHistory(history([dropped], { node_faults: [{ node: 'n1', from_ms: 0, to_ms: 5_000 }] })).bad_refusals).toBe(1);
  });

  it('(d) catches a refused write (not_enough_replicas) that was applied', () => {
    const refused = failedAcquire('k', 0, 5, 503, 'not_enough_replicas', { owner_id: 'ghost' });
    const report = checkHistory(history([refused, read('k', 100, true, 'LX', 1, 'ghost')]));
    expect(report.bad_refusals).toBe(1);
    // An acquisition with an unknown outcome may show up.
    const unknown = failedAcquire('k', 0, 5, 503, 'partition_unavailable', { owner_id: 'maybe' });
    expect(checkHistory(history([unknown, read('k', 100, true, 'LY', 1, 'maybe')])).violations).toEqual([]);
  });

  it('(e) measures the availability window from the fault start and end', () => {
    // Served answers every 100 ms, except for 10.0..13.5 s: failures, then the first success at 13.5 s.
    const ops: LockOp[] = [];
    for (let t = 0; t < 20_000; t += 100) {
      if (t >= 10_000 && t < 13_500) ops.push(failedAcquire('k', t, t + 50, 503, 'partition_unavailable'));
      else ops.push(failedAcquire('k', t, t + 5, 409, 'lock_held'));
    }
    const w = checkHistory(history(ops)).windows;
    expect(w.from_start_ms).toBe(3_505);
    expect(w.from_end_ms).toBe(1_505);
    expect(w.longest_ms).toBe(3_505);
    expect(w.outages).toBe(1);
    expect(w.unrecovered).toBe(false);
  });

  it('(e) counts a slow success as an outage, a fast one not, and an outage before the fault not', () => {
    const ops: LockOp[] = [
      failedAcquire('k', 2_000, 2_100, 503, 'partition_unavailable'),
      failedAcquire('k', 2_200, 2_210, 409, 'lock_held'),
      acquire('k', 10_500, 10_520, 'L1', 1),
      acquire('k', 11_000, 11_000 + SLOW_MS + 200, 'L2', 2, { ttl_ms: 60_000 }),
    ];
    const w = checkHistory(history(ops)).windows;
    expect(w.outages).toBe(1);
    expect(w.from_start_ms).toBe(1_000 + SLOW_MS + 200);
    expect(w.longest_ms).toBe(SLOW_MS + 200);
  });

  it('(e) reports an outage that never ended', () => {
    const ops = [failedAcquire('k', 9_000, 9_005, 409, 'lock_held'), failedAcquire('k', 11_000, 11_050, 503, 'partition_unavailable')];
    const w = checkHistory(history(ops, { load_end_ms: 20_000 })).windows;
    expect(w.unrecovered).toBe(true);
    expect(w.from_start_ms).toBe(10_000);
  });
});

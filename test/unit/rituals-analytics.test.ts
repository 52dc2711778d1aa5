import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { median } from '../../actors/rituals/analytics.js';
import type { AnalyticsView, RecordMessage } from '../../actors/rituals/messages.js';
import { loadRecord, stepRecord, type RecordState } from '../../actors/rituals/record-state.js';
import { fixedContext } from '../helpers/step.js';

/** History and analytics from outbox deltas, pure (docs/api/rituals.md, "Analytics"). */
function apply(state: RecordState, message: RecordMessage) {
  return stepRecord(state, message, fixedContext(0, 'ritual-record', 'k'));
}

describe('ritual analytics', () => {
  it('counts outcomes once (a repeated delta is ignored) and ranks lateness with near misses', () => {
    let state = loadRecord('k', []);
    const outcome = (attempt_id: string, outcome: 'completed' | 'failed', spread_ms: number | null, late_parts: string[]): RecordMessage => ({
      op: 'outcome', delta: { attempt_id, outcome, ended_at_ms: 0, spread_ms, late_parts },
    });
    state = apply(state, outcome('1', 'completed', 100, [])).state;
    state = apply(state, outcome('1', 'completed', 100, [])).state;
    state = apply(state, outcome('2', 'failed', null, ['b', 'c'])).state;
    state = apply(state, { op: 'late', attempt_id: '2', part_id: 'b', late_by_ms: 300, near_miss: true }).state;
    state = apply(state, outcome('3', 'failed', null, ['c'])).state;
    state = apply(state, outcome('4', 'completed', 300, [])).state;
    const all = apply(state, { op: 'analytics' }).reply as AnalyticsView;
    expect(all).toMatchObject({ total_attempts: 4, completed: 2, failed: 2, success_rate: 0.5, median_spread_ms: 100 });
    expect(all.lateness_leaders).toEqual([
      { part_id: 'c', late_count: 2, near_miss_count: 0, total_late_ms: 0 },
      { part_id: 'b', late_count: 1, near_miss_count: 1, total_late_ms: 300 },
    ]);
    const recent = apply(state, { op: 'analytics', sample: 2 }).reply as AnalyticsView;
    expect(recent).toMatchObject({ total_attempts: 2, completed: 1, failed: 1, median_spread_ms: 300, sampled: 2 });
    expect(recent.lateness_leaders).toEqual([{ part_id: 'c', late_count: 1, near_miss_count: 0, total_late_ms: 0 }]);
  });

  it('counts a part named like an Object.prototype member as its own entry, and touches no prototype', () => {
    let state = loadRecord('k', []);
    for (const part_id of ['__proto__', 'constructor', 'toString']) {
      state = apply(state, { op: 'outcome', delta: { attempt_id: part_id, outcome: 'failed', ended_at_ms: 0, spread_ms: null, late_parts: [part_id] } }).state;
      state = apply(state, { op: 'late', attempt_id: part_id, part_id, late_by_ms: 5, near_miss: false }).state;
    }
    const all = apply(state, { op: 'analytics' }).reply as AnalyticsView;
    expect(all.lateness_leaders.map((leader) => [leader.part_id, leader.late_count, leader.total_late_ms]).sort()).toEqual([['__proto__', 1, 5], ['constructor', 1, 5], ['toString', 1, 5]]);
    expect(Object.hasOwn(Object.prototype, 'late_count')).toBe(false);
    expect(({} as { late_count?: unknown }).late_count).toBeUndefined();
    expect((Object as unknown as { late_count?: unknown }).late_count).toBeUndefined();
  });

  it('the state rebuilt from its writes answers the same', () => {
    const records = new Map<string, unknown>();
    let state = loadRecord('k', []);
    for (const [i, status] of (['completed', 'failed', 'completed'] as const).entries()) {
      const result = apply(state, { op: 'outcome', delta: { attempt_id: String(i), outcome: status, ended_at_ms: i, spread_ms: status === 'completed' ? i * 10 : null, late_parts: status === 'failed' ? ['x'] : [] } });
      for (const write of result.writes ?? []) write.value === undefined ? records.delete(write.subkey) : records.set(write.subkey, structuredClone(write.value));
      state = result.state;
    }
    const reloaded = loadRecord('k', [...records.entries()].sort());
    expect(apply(reloaded, { op: 'analytics' }).reply).toEqual(apply(state, { op: 'analytics' }).reply);
  });

  it('median is the lower middle of the sorted values', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 1e6 }), { minLength: 1, maxLength: 50 }), (values) => {
        const m = median(values);
        expect(values.filter((v) => v < m).length).toBeLessThanOrEqual(Math.floor((values.length - 1) / 2));
        expect(values.filter((v) => v <= m).length).toBeGreaterThanOrEqual(Math.floor((values.length - 1) / 2) + 1);
      }),
    );
    expect(median([])).toBe(0);
  });
});

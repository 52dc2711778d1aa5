import { describe, expect, it } from 'vitest';
import { levelForXp, normaliseCurve, pointsForLevels, stepXp } from '../../actors/talent/curves.js';
import { talentLimits, type CurveInput } from '../../actors/talent/messages.js';
import { applyXp, initialTalentUserState } from '../../actors/talent/user-state.js';
import { codeOf } from '../helpers/step.js';

/** XP curves and the wallet's XP events, pure (docs/api/talent.md, "Curves", "Wallet and XP"). */
const curve = (input: Partial<CurveInput> & Pick<CurveInput, 'kind'>) =>
  normaliseCurve({ curve_id: 'c', max_level: 10, points_per_level: [{ currency: 'tp', amount: 1 }], ...input }, 'u1', 0);

describe('talent curves', () => {
  it('linear: base + per_level * (k - 1) from level k to k + 1', () => {
    const c = curve({ kind: 'linear', params: { base: 100, per_level: 50 } });
    expect([1, 2, 3].map((k) => stepXp(c, k))).toEqual([100, 150, 200]);
    expect(levelForXp(c, 0)).toBe(1);
    expect(levelForXp(c, 99)).toBe(1);
    expect(levelForXp(c, 100)).toBe(2);
    expect(levelForXp(c, 249)).toBe(2);
    expect(levelForXp(c, 250)).toBe(3);
  });

  it('exponential: floor(base * exponent^(k - 1))', () => {
    const c = curve({ kind: 'exponential', params: { base: 100, exponent: 1.5 } });
    expect([1, 2, 3, 4].map((k) => stepXp(c, k))).toEqual([100, 150, 225, 337]);
    expect(levelForXp(c, 100 + 150 + 225)).toBe(4);
  });

  it('table: table[k - 1]; the level stops at max_level while XP keeps counting', () => {
    const c = curve({ kind: 'table', max_level: 4, params: { table: [10, 20, 30] } });
    expect(levelForXp(c, 29)).toBe(2);
    expect(levelForXp(c, 30)).toBe(3);
    expect(levelForXp(c, 60)).toBe(4);
    expect(levelForXp(c, 10_000_000)).toBe(4);
  });

  it('level-ups credit points_per_level in every currency, plus the bonus levels', () => {
    const c = curve({
      kind: 'linear',
      params: { base: 10 },
      points_per_level: [{ currency: 'tp', amount: 2 }, { currency: 'gold', amount: 5 }],
      bonus_levels: [{ level: 3, extra: [{ currency: 'tp', amount: 10 }] }],
    });
    expect(pointsForLevels(c, 1, 2)).toEqual({ tp: 2, gold: 5 });
    expect(pointsForLevels(c, 1, 4)).toEqual({ tp: 16, gold: 15 });
    expect(pointsForLevels(c, 3, 3)).toEqual({});
  });

  it('refuses curves it cannot compute, naming every problem', () => {
    expect(codeOf(() => curve({ kind: 'linear', params: {} }))).toBe('talent_curve_invalid');
    expect(codeOf(() => curve({ kind: 'exponential', params: { base: 10 } }))).toBe('talent_curve_invalid');
    expect(codeOf(() => curve({ kind: 'table', params: { table: [1, 2] } }))).toBe('talent_curve_invalid');
    expect(codeOf(() => curve({ kind: 'linear', params: { base: 1 }, bonus_levels: [{ level: 11, extra: [] }] }))).toBe('talent_curve_invalid');
    try {
      curve({ kind: 'table', params: { table: [0] }, bonus_levels: [{ level: 2, extra: [] }, { level: 2, extra: [] }] });
    } catch (error) {
      expect((error as { details: string[] }).details).toHaveLength(3);
    }
  });
});

describe('talent XP event ids', () => {
  const c = curve({ kind: 'linear', params: { base: 10 } });
  it('are remembered for 24 h and up to the last 1,000, then forgotten', () => {
    let state = initialTalentUserState();
    state = applyXp(state, c, { curve_id: 'c', amount: 5, event_id: 'old' }, 0).state;
    expect(applyXp(state, c, { curve_id: 'c', amount: 5, event_id: 'old' }, 1000).reply.idempotent).toBe(true);
    // A later event prunes ids past their 24 h; the old id then counts again.
    state = applyXp(state, c, { curve_id: 'c', amount: 1, event_id: 'new' }, talentLimits.xp_event_retention_ms + 1).state;
    expect(Object.keys(state.events)).toEqual(['new']);
    expect(applyXp(state, c, { curve_id: 'c', amount: 5, event_id: 'old' }, talentLimits.xp_event_retention_ms + 2).reply.idempotent).toBe(false);
    for (let i = 0; i < talentLimits.xp_events_remembered_max + 5; i++) state = applyXp(state, c, { curve_id: 'c', amount: 1, event_id: `e${i}` }, talentLimits.xp_event_retention_ms + 10 + i).state;
    expect(Object.keys(state.events)).toHaveLength(talentLimits.xp_events_remembered_max);
    expect(state.events.e4).toBeUndefined();
    expect(state.events.e5).toBeDefined();
  });

  it('an event without id always counts; XP saturates instead of overflowing', () => {
    let state = initialTalentUserState();
    state = applyXp(state, c, { curve_id: 'c', amount: 5, event_id: null }, 0).state;
    state = applyXp(state, c, { curve_id: 'c', amount: 5, event_id: null }, 0).state;
    expect(state.xp.c.total_xp).toBe(10);
    expect(state.events).toEqual({});
    state = { ...state, xp: { c: { total_xp: Number.MAX_SAFE_INTEGER - 1, current_level: 10 } } };
    expect(applyXp(state, c, { curve_id: 'c', amount: 1000, event_id: null }, 0).state.xp.c.total_xp).toBe(Number.MAX_SAFE_INTEGER);
  });
});

import { describe, expect, it } from 'vitest';
import { levelForXp, normaliseCurve, pointsForLevels, stepXp, XP_TOTAL_MAX } from '../../actors/talent/curves.js';
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

  it('exponential steps are exact past 10^9 (no cap): level 3 of {base 1e9, exponent 10} needs 1.1e10 XP', () => {
    const c = curve({ kind: 'exponential', params: { base: 1_000_000_000, exponent: 10 } });
    expect([1, 2, 3, 4, 7].map((k) => stepXp(c, k))).toEqual([1e9, 1e10, 1e11, 1e12, 1e15]);
    expect([1e9, 2e9, 3e9, 1.1e10 - 1].map((xp) => levelForXp(c, xp))).toEqual([2, 2, 2, 2]);
    expect(levelForXp(c, 1.1e10)).toBe(3);
    expect(levelForXp(c, 1.11e11)).toBe(4);
    // Three events of 1e9 (the tester's repro): level 2 only.
    let state = initialTalentUserState();
    for (let i = 0; i < 3; i++) state = applyXp(state, c, { curve_id: 'c', amount: 1e9, event_id: null }, 0).state;
    expect(state.xp.c).toEqual({ total_xp: 3e9, current_level: 2 });
  });

  it('linear steps are exact past 10^9 too', () => {
    const c = curve({ kind: 'linear', params: { base: 1_000_000_000, per_level: 1_000_000_000 } });
    expect([1, 2, 3].map((k) => stepXp(c, k))).toEqual([1e9, 2e9, 3e9]);
    expect(levelForXp(c, 3e9 - 1)).toBe(2);
    expect(levelForXp(c, 3e9)).toBe(3);
  });

  it('fractional params: exact in decimal, as written, rounded down (not in binary floating point)', () => {
    // In doubles 100 * 1.7 ** 2 is 288.99999999999994; in decimal it is 289.
    const c = curve({ kind: 'exponential', params: { base: 100, exponent: 1.7 } });
    expect([1, 2, 3].map((k) => stepXp(c, k))).toEqual([100, 170, 289]);
    expect(stepXp(curve({ kind: 'exponential', params: { base: 2.5, exponent: 1.5 } }), 3)).toBe(5);
    expect(stepXp(curve({ kind: 'exponential', params: { base: 1000, exponent: 1.1 } }), 4)).toBe(1331);
  });

  it('past 2^53 - 1: a step beyond it is Infinity, and a level whose total XP needed is beyond it is never reached', () => {
    // Steps 1e9 * 2^(k-1): step 24 (8.39e15) is still exact, but level 25 needs 1e9 * (2^24 - 1) = 1.68e16 in total; step 25 is past 2^53 - 1.
    const c = curve({ kind: 'exponential', max_level: 100, params: { base: 1_000_000_000, exponent: 2 } });
    expect(stepXp(c, 24)).toBe(1e9 * 2 ** 23);
    expect(stepXp(c, 25)).toBe(Number.POSITIVE_INFINITY);
    expect(stepXp(c, 30)).toBe(Number.POSITIVE_INFINITY);
    expect(levelForXp(c, 1e9 * (2 ** 23 - 1) - 1)).toBe(23);
    expect(levelForXp(c, 1e9 * (2 ** 23 - 1))).toBe(24);
    expect(levelForXp(c, XP_TOTAL_MAX)).toBe(24);
    // total_xp saturates at 2^53 - 1 and the level stays at 24.
    const saturated = { ...initialTalentUserState(), xp: { c: { total_xp: XP_TOTAL_MAX - 5, current_level: 24 } } };
    expect(applyXp(saturated, c, { curve_id: 'c', amount: 1e9, event_id: null }, 0).state.xp.c).toEqual({ total_xp: XP_TOTAL_MAX, current_level: 24 });
    // The largest exponent at the largest level stays cheap: one BigInt product per level, memoised per curve.
    const steep = curve({ kind: 'exponential', max_level: talentLimits.curve_max_level_max, params: { base: 999_999_999.5, exponent: 1 + 2 ** -52 } });
    expect(stepXp(steep, 1)).toBe(999_999_999);
    expect(levelForXp(steep, XP_TOTAL_MAX)).toBe(talentLimits.curve_max_level_max);
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

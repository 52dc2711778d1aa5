import { describe, expect, it } from 'vitest';
import { levelForXp, normaliseCurve, pointsForLevels, stepXp } from '../../actors/talent/curves.js';
import type { CurveInput } from '../../actors/talent/messages.js';
import { codeOf } from '../helpers/step.js';

/** XP curves, pure (docs/api/talent.md, "Curves"). */
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

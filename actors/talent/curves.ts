import { ServiceError } from '../../runtime/index.js';
import type { Cost, Curve, CurveInput } from './messages.js';

/**
 * XP curves, pure. A user starts at level 1 with 0 XP; `stepXp(curve, k)` is
 * the XP needed to go from level k to level k + 1:
 * - `linear`:      base + per_level * (k - 1)
 * - `exponential`: floor(base * exponent^(k - 1))
 * - `table`:       table[k - 1]
 * Each level reached credits `points_per_level`, plus the `extra` of a bonus
 * level equal to it. XP past max_level still counts in total_xp.
 *
 * Steps are exact integers with no cap (docs/api/talent.md, "Curves"): the
 * exponential one is computed with BigInt over base and exponent as decimals
 * (their shortest decimal form, as JSON shows them), rounded down. total_xp
 * saturates at XP_TOTAL_MAX, so a level whose total XP needed is beyond it
 * is never reached; a step beyond it is Infinity.
 */

/** total_xp stops here (2^53 - 1, the largest integer a JSON number carries exactly); levels beyond it are never reached. */
export const XP_TOTAL_MAX = Number.MAX_SAFE_INTEGER;
const XP_TOTAL_MAX_BIG = BigInt(XP_TOTAL_MAX);

/** Refuses a curve that cannot be computed; returns it with defaults filled in. */
export function normaliseCurve(input: CurveInput, created_by: string, created_at_ms: number): Curve {
  const problems: string[] = [];
  const params = input.params ?? {};
  const isInt = (value: unknown, min: number) => Number.isSafeInteger(value) && (value as number) >= min;
  if (input.kind === 'linear') {
    if (!isInt(params.base, 1)) problems.push('params.base must be an integer >= 1 for a linear curve');
    if (params.per_level !== undefined && !isInt(params.per_level, 0)) problems.push('params.per_level must be an integer >= 0');
  } else if (input.kind === 'exponential') {
    if (typeof params.base !== 'number' || params.base < 1) problems.push('params.base must be >= 1 for an exponential curve');
    if (typeof params.exponent !== 'number' || params.exponent < 1 || params.exponent > 10) problems.push('params.exponent must be between 1 and 10');
  } else if (input.kind === 'table') {
    const table = params.table ?? [];
    if (table.length < input.max_level - 1) problems.push(`params.table needs max_level - 1 = ${input.max_level - 1} entries (XP from each level to the next)`);
    if (table.some((step) => !isInt(step, 1))) problems.push('params.table entries must be integers >= 1');
  }
  const levels = new Set<number>();
  for (const bonus of input.bonus_levels ?? []) {
    if (bonus.level < 2 || bonus.level > input.max_level) problems.push(`bonus level ${bonus.level} is outside 2..max_level`);
    if (levels.has(bonus.level)) problems.push(`bonus level ${bonus.level} is listed twice`);
    levels.add(bonus.level);
  }
  if (problems.length > 0) throw new ServiceError('talent_curve_invalid', `The curve is invalid: ${problems.join('; ')}.`, { details: problems });
  return {
    curve_id: input.curve_id,
    kind: input.kind,
    max_level: input.max_level,
    points_per_level: input.points_per_level,
    params: { ...params, ...(input.kind === 'linear' && params.per_level === undefined ? { per_level: 0 } : {}) },
    bonus_levels: [...(input.bonus_levels ?? [])].sort((a, b) => a.level - b.level),
    created_at_ms,
    created_by,
  };
}

/**
 * A finite number >= 0 as the exact decimal fraction digits / 10^scale of its
 * shortest decimal form (what JSON shows: 1.7 is 17 / 10, not the binary
 * double just under it).
 */
function decimalOf(value: number): { digits: bigint; scale: number } {
  const match = /^(\d+)(?:\.(\d+))?(?:e([+-]?\d+))?$/.exec(String(value));
  if (!match) throw new Error(`not a finite number >= 0: ${value}`);
  const fraction = match[2] ?? '';
  const scale = fraction.length - Number(match[3] ?? 0);
  const digits = BigInt(match[1] + fraction);
  return scale >= 0 ? { digits, scale } : { digits: digits * 10n ** BigInt(-scale), scale: 0 };
}

/** Exponential steps, memoised per curve object (curves are immutable): the ones up to XP_TOTAL_MAX, in order. */
const exponentialStepsByCurve = new WeakMap<Curve, readonly number[]>();

/**
 * floor(base * exponent^(k - 1)) for k = 1, 2, ... while it is at most
 * XP_TOTAL_MAX and k < max_level, exactly in decimal: one running BigInt
 * fraction (no power per level), so a curve costs at most max_level - 1
 * multiplications and divisions (about 10 ms for the longest curve with a
 * 17-digit exponent, microseconds for usual ones), once per curve object.
 * Steps never shrink (base >= 1, exponent >= 1): the first one past
 * XP_TOTAL_MAX ends the list.
 */
function exponentialSteps(curve: Curve): readonly number[] {
  const cached = exponentialStepsByCurve.get(curve);
  if (cached) return cached;
  const base = decimalOf(curve.params.base ?? 1);
  const exponent = decimalOf(curve.params.exponent ?? 1);
  const exponentDivisor = 10n ** BigInt(exponent.scale);
  const steps: number[] = [];
  let numerator = base.digits;
  let divisor = 10n ** BigInt(base.scale);
  for (let level = 1; level < curve.max_level; level++) {
    const step = numerator / divisor;
    if (step > XP_TOTAL_MAX_BIG) break;
    steps.push(Number(step));
    numerator *= exponent.digits;
    divisor *= exponentDivisor;
  }
  exponentialStepsByCurve.set(curve, steps);
  return steps;
}

/** XP from level k to k + 1 (1 <= k < max_level), exact; Infinity when it is beyond XP_TOTAL_MAX (never reached). */
export function stepXp(curve: Curve, level: number): number {
  const { params } = curve;
  let step: number;
  if (curve.kind === 'linear') step = (params.base ?? 1) + (params.per_level ?? 0) * (level - 1);
  else if (curve.kind === 'exponential') step = exponentialSteps(curve)[level - 1] ?? Number.POSITIVE_INFINITY;
  else step = params.table?.[level - 1] ?? Number.POSITIVE_INFINITY;
  return step > XP_TOTAL_MAX ? Number.POSITIVE_INFINITY : Math.max(1, step);
}

/**
 * The level a total of XP reaches, capped at max_level. `needed` is a sum of
 * exact safe integers: exact while at most XP_TOTAL_MAX, and past it (even
 * rounded, or Infinity) above any total_xp, so the comparison stays exact.
 */
export function levelForXp(curve: Curve, total_xp: number): number {
  let level = 1;
  let needed = 0;
  while (level < curve.max_level) {
    needed += stepXp(curve, level);
    if (total_xp < needed) break;
    level += 1;
  }
  return level;
}

/** Points credited for reaching every level in (old_level, new_level]: points_per_level and the bonus levels' extra. */
export function pointsForLevels(curve: Curve, old_level: number, new_level: number): Record<string, number> {
  const granted: Record<string, number> = {};
  const add = (costs: Cost[]) => {
    for (const cost of costs) granted[cost.currency] = (granted[cost.currency] ?? 0) + cost.amount;
  };
  for (let level = old_level + 1; level <= new_level; level++) {
    add(curve.points_per_level);
    for (const bonus of curve.bonus_levels) if (bonus.level === level) add(bonus.extra);
  }
  return granted;
}

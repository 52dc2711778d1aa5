/**
 * Money as the x402 area handles it: USD amounts travel as decimal strings
 * ("0.01", "12.5") and are kept as integer atomic units of 6 decimals (the
 * USDC token's unit: 1 USD = 1,000,000 atomic). No float ever touches an
 * amount: parsing and formatting work on the digits.
 */

/** Decimals of an atomic unit (USDC has 6). */
export const USD_DECIMALS = 6;
export const ATOMIC_PER_USD = 1_000_000;
/** The largest amount or balance the area holds: one billion USD, 10^15 atomic (a safe integer). */
export const AMOUNT_USD_MAX = 1_000_000_000;
export const AMOUNT_ATOMIC_MAX = AMOUNT_USD_MAX * ATOMIC_PER_USD;

/** An unsigned decimal with at most 6 fractional digits; the API's pattern for amount_usd. */
export const USD_PATTERN = '^[0-9]{1,10}(\\.[0-9]{1,6})?$';
const USD_SYNTAX = new RegExp(USD_PATTERN);

export type ParsedUsd = { ok: true; atomic: number } | { ok: false; reason: string };

/**
 * "12.345" -> 12345000 atomic. Refuses signs, exponents, spaces, more than 6
 * decimals (it would need rounding) and amounts above AMOUNT_USD_MAX.
 */
export function parseUsd(text: string): ParsedUsd {
  if (typeof text !== 'string' || !USD_SYNTAX.test(text)) {
    if (typeof text === 'string' && /^[0-9]+\.[0-9]{7,}$/.test(text)) return { ok: false, reason: 'has more than 6 decimals' };
    return { ok: false, reason: 'must be a decimal string such as "0.01" (digits, optionally a point and up to 6 decimals)' };
  }
  const point = text.indexOf('.');
  const whole = point < 0 ? text : text.slice(0, point);
  const fraction = point < 0 ? '' : text.slice(point + 1);
  // At most 10 + 6 digits: below 2^53, so the integer arithmetic is exact.
  const atomic = Number(whole) * ATOMIC_PER_USD + Number(fraction.padEnd(USD_DECIMALS, '0'));
  if (atomic > AMOUNT_ATOMIC_MAX) return { ok: false, reason: `must be at most ${AMOUNT_USD_MAX}` };
  return { ok: true, atomic };
}

/** 12345000 -> "12.345": the canonical form (no leading zeros, no trailing fractional zeros, no point for whole amounts). */
export function formatUsd(atomic: number): string {
  if (!Number.isSafeInteger(atomic) || atomic < 0) throw new RangeError(`not an atomic amount: ${atomic}`);
  const digits = String(atomic).padStart(USD_DECIMALS + 1, '0');
  const whole = digits.slice(0, digits.length - USD_DECIMALS);
  const fraction = digits.slice(digits.length - USD_DECIMALS).replace(/0+$/, '');
  return fraction === '' ? whole : `${whole}.${fraction}`;
}

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AMOUNT_ATOMIC_MAX, formatUsd, parseUsd } from '../../actors/x402/messages.js';

/** The reference: the same conversion done with BigInt on the digits (never a float). */
function referenceAtomic(text: string): bigint {
  const [whole, fraction = ''] = text.split('.');
  return BigInt(whole) * 1_000_000n + BigInt(fraction.padEnd(6, '0'));
}

const digits = (min: number, max: number) => fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: min, maxLength: max });
/** Decimal strings of the accepted syntax (up to 9 whole digits, so all are within the maximum). */
const usdText = fc.tuple(digits(1, 9), fc.option(digits(1, 6), { nil: undefined })).map(([whole, fraction]) => (fraction === undefined ? whole : `${whole}.${fraction}`));

describe('x402 money: decimal strings and atomic units', () => {
  it('parses exactly as integer arithmetic on the digits does', () => {
    fc.assert(
      fc.property(usdText, (text) => {
        const parsed = parseUsd(text);
        expect(parsed.ok).toBe(true);
        if (parsed.ok) expect(BigInt(parsed.atomic)).toBe(referenceAtomic(text));
      }),
    );
  });

  it('round-trips every atomic amount exactly: parse(format(n)) = n', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: AMOUNT_ATOMIC_MAX }), (atomic) => {
        const parsed = parseUsd(formatUsd(atomic));
        expect(parsed).toEqual({ ok: true, atomic });
      }),
    );
  });

  it('formats to the canonical form: format(parse(s)) names the same amount with no padding', () => {
    fc.assert(
      fc.property(usdText, (text) => {
        const parsed = parseUsd(text);
        if (!parsed.ok) throw new Error('unreachable');
        const canonical = formatUsd(parsed.atomic);
        expect(canonical).toMatch(/^(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$/);
        expect(referenceAtomic(canonical)).toBe(referenceAtomic(text));
      }),
    );
  });

  it('refuses more than 6 decimals, whatever the digits', () => {
    fc.assert(
      fc.property(digits(1, 6), digits(7, 20), (whole, fraction) => {
        const parsed = parseUsd(`${whole}.${fraction}`);
        expect(parsed.ok).toBe(false);
        if (!parsed.ok) expect(parsed.reason).toContain('more than 6 decimals');
      }),
    );
  });

  it('refuses what is not a plain unsigned decimal', () => {
    for (const text of ['', '-1', '+1', '1e3', '1E-2', '.5', '1.', ' 1', '1 ', '0x10', 'NaN', 'Infinity', '1,5', '1.2.3', '１']) {
      expect(parseUsd(text).ok, text).toBe(false);
    }
  });

  it('refuses amounts above one billion USD and accepts the maximum', () => {
    expect(parseUsd('1000000000')).toEqual({ ok: true, atomic: AMOUNT_ATOMIC_MAX });
    expect(parseUsd('1000000000.000001').ok).toBe(false);
    expect(parseUsd('9999999999').ok).toBe(false);
  });

  it('knows the small cases', () => {
    expect(parseUsd('0.01')).toEqual({ ok: true, atomic: 10_000 });
    expect(parseUsd('0.000001')).toEqual({ ok: true, atomic: 1 });
    expect(parseUsd('007.50')).toEqual({ ok: true, atomic: 7_500_000 });
    expect(formatUsd(0)).toBe('0');
    expect(formatUsd(1)).toBe('0.000001');
    expect(formatUsd(7_500_000)).toBe('7.5');
    expect(formatUsd(12_000_000)).toBe('12');
    expect(() => formatUsd(-1)).toThrow();
    expect(() => formatUsd(0.5)).toThrow();
  });
});

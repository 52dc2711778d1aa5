import { describe, expect, it } from 'vitest';
import { formatIsoUtc } from '../../http/iso-format.js';
import { isoTime } from '../../http/schemas.js';

/** isoTime keeps its last strings by the low bits of their epoch-ms (http/schemas.ts): what it returns is Date's, whatever came before. */
describe('isoTime', () => {
  it('gives Date.toISOString for every value, repeated, colliding in its slots, fractional or negative', () => {
    let state = 5;
    const random = () => (state = (state * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    const base = Date.UTC(2026, 10, 29);
    const values: number[] = [];
    for (let i = 0; i < 5_000; i++) {
      const pick = random();
      // Same slot, other instants (256 ms apart); repeats; fractions; before 1970.
      values.push(pick < 0.3 ? base + 256 * Math.floor(random() * 50) : pick < 0.6 ? base + Math.floor(random() * 20) : pick < 0.8 ? base + random() * 1000 : -Math.floor(random() * 1e12));
    }
    for (const value of values) expect(isoTime(value)).toBe(new Date(value).toISOString());
  });

  it('passes null and undefined through, and refuses a time Date cannot hold', () => {
    expect(isoTime(null)).toBeNull();
    expect(isoTime(undefined)).toBeNull();
    expect(() => isoTime(Number.NaN)).toThrow(RangeError);
    expect(() => isoTime(8.64e15 + 1)).toThrow(RangeError);
    expect(isoTime(0)).toBe('1970-01-01T00:00:00.000Z');
  });
});

/** formatIsoUtc (http/iso-format.ts) writes what Date.prototype.toISOString writes, for every time. */
describe('formatIsoUtc', () => {
  it('matches toISOString across 1970-9999, on the days around every kind of leap year, and at the ends', () => {
    let state = 11;
    const random = () => (state = (state * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
    const values: number[] = [0, 1, 999, 1000, 86_399_999, 86_400_000, 253_402_300_799_999];
    for (let i = 0; i < 20_000; i++) values.push(Math.floor(random() * 253_402_300_800_000));
    // Around 28 Feb - 1 Mar and 31 Dec - 1 Jan of ordinary years, of years divisible by 4, by 100 and by 400.
    for (const year of [1970, 1972, 1999, 2000, 2024, 2026, 2100, 2400, 9999]) {
      for (const [month, day] of [[1, 28], [1, 29], [2, 1], [11, 31], [0, 1]] as const) {
        const midnight = Date.UTC(year, month, day);
        for (const offset of [-1, 0, 1, 43_200_000, 86_399_999]) if (midnight + offset >= 0) values.push(midnight + offset);
      }
    }
    for (const value of values) expect(formatIsoUtc(value)).toBe(new Date(value).toISOString());
  });

  it('leaves what it does not write in arithmetic to Date: fractions, before 1970, six-digit years, and what Date refuses', () => {
    for (const value of [0.5, 1_700_000_000_000.25, -1, -62_198_755_200_000, 253_402_300_800_000, 8.64e15, -8.64e15]) {
      expect(formatIsoUtc(value)).toBe(new Date(value).toISOString());
    }
    expect(() => formatIsoUtc(Number.NaN)).toThrow(RangeError);
    expect(() => formatIsoUtc(Number.POSITIVE_INFINITY)).toThrow(RangeError);
    expect(() => formatIsoUtc(8.64e15 + 1)).toThrow(RangeError);
  });
});

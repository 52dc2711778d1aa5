import { describe, expect, it } from 'vitest';
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

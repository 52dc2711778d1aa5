import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { matchesFilterPolicy, parseFilterPolicy } from '../../actors/mq/filter-policy.js';
import { codeOf } from '../helpers/step.js';

/** SNS-style filter policies over message attributes (docs/api/mq.md "Filter policies"). */
const matches = (policy: unknown, attributes: Record<string, string | number | boolean>) => matchesFilterPolicy(parseFilterPolicy(policy), attributes);

describe('mq filter policies', () => {
  it('exact values: strings, numbers and booleans, ORed within a name', () => {
    expect(matches({ color: ['red', 'blue'] }, { color: 'red' })).toBe(true);
    expect(matches({ color: ['red', 'blue'] }, { color: 'green' })).toBe(false);
    expect(matches({ size: [5] }, { size: 5 })).toBe(true);
    expect(matches({ size: [5] }, { size: '5' })).toBe(false);
    expect(matches({ vip: [true] }, { vip: true })).toBe(true);
    expect(matches({ vip: [true] }, { vip: false })).toBe(false);
  });

  it('names are ANDed; a missing attribute matches nothing but exists:false', () => {
    const policy = { color: ['red'], size: [{ numeric: ['>', 10] }] };
    expect(matches(policy, { color: 'red', size: 11 })).toBe(true);
    expect(matches(policy, { color: 'red', size: 10 })).toBe(false);
    expect(matches(policy, { color: 'red' })).toBe(false);
    expect(matches({ color: [{ 'anything-but': 'red' }] }, {})).toBe(false);
    expect(matches({ color: [{ prefix: 'r' }] }, {})).toBe(false);
  });

  it('prefix, suffix and equals-ignore-case match strings only', () => {
    expect(matches({ region: [{ prefix: 'eu-' }] }, { region: 'eu-west-1' })).toBe(true);
    expect(matches({ region: [{ prefix: 'eu-' }] }, { region: 'us-east-1' })).toBe(false);
    expect(matches({ file: [{ suffix: '.png' }] }, { file: 'a.png' })).toBe(true);
    expect(matches({ file: [{ suffix: '.png' }] }, { file: 'a.jpg' })).toBe(false);
    expect(matches({ name: [{ 'equals-ignore-case': 'Alice' }] }, { name: 'aLiCe' })).toBe(true);
    expect(matches({ n: [{ prefix: '1' }] }, { n: 12 })).toBe(false);
  });

  it('numeric: equality, open bounds and ranges, on numbers only', () => {
    expect(matches({ price: [{ numeric: ['=', 100] }] }, { price: 100 })).toBe(true);
    expect(matches({ price: [{ numeric: ['>=', 0, '<', 100] }] }, { price: 0 })).toBe(true);
    expect(matches({ price: [{ numeric: ['>=', 0, '<', 100] }] }, { price: 100 })).toBe(false);
    expect(matches({ price: [{ numeric: ['>', 0, '<=', 100] }] }, { price: 100 })).toBe(true);
    expect(matches({ price: [{ numeric: ['>', 0, '<=', 100] }] }, { price: 0 })).toBe(false);
    expect(matches({ price: [{ numeric: ['<', 5] }] }, { price: 4.5 })).toBe(true);
    expect(matches({ price: [{ numeric: ['<', 5] }] }, { price: '4' })).toBe(false);
  });

  it('anything-but: a value, a list, a prefix or a suffix', () => {
    expect(matches({ color: [{ 'anything-but': 'red' }] }, { color: 'blue' })).toBe(true);
    expect(matches({ color: [{ 'anything-but': 'red' }] }, { color: 'red' })).toBe(false);
    expect(matches({ color: [{ 'anything-but': ['red', 'blue'] }] }, { color: 'blue' })).toBe(false);
    expect(matches({ n: [{ 'anything-but': [1, 2] }] }, { n: 3 })).toBe(true);
    expect(matches({ region: [{ 'anything-but': { prefix: 'eu-' } }] }, { region: 'us-1' })).toBe(true);
    expect(matches({ region: [{ 'anything-but': { prefix: 'eu-' } }] }, { region: 'eu-1' })).toBe(false);
    expect(matches({ file: [{ 'anything-but': { suffix: '.tmp' } }] }, { file: 'x.tmp' })).toBe(false);
  });

  it('exists: true needs the attribute, false its absence', () => {
    expect(matches({ trace: [{ exists: true }] }, { trace: 'x' })).toBe(true);
    expect(matches({ trace: [{ exists: true }] }, {})).toBe(false);
    expect(matches({ trace: [{ exists: false }] }, {})).toBe(true);
    expect(matches({ trace: [{ exists: false }] }, { trace: 'x' })).toBe(false);
  });

  it('refuses malformed policies with BAD_REQUEST', () => {
    for (const bad of [
      null,
      [],
      'x',
      {},
      { a: [] },
      { a: 'red' },
      { a: [null] },
      { a: [{ prefix: '' }] },
      { a: [{ prefix: 1 }] },
      { a: [{ unknown: 1 }] },
      { a: [{ prefix: 'x', suffix: 'y' }] },
      { a: [{ numeric: ['>', 'x'] }] },
      { a: [{ numeric: ['!=', 1] }] },
      { a: [{ numeric: ['<', 1, '>', 0] }] },
      { a: [{ numeric: ['>', 5, '<', 1] }] },
      { a: [{ numeric: ['>', 1, '<'] }] },
      { a: [{ 'anything-but': [] }] },
      { a: [{ exists: 'yes' }] },
      { a: [1], b: [1], c: [1], d: [1], e: [1], f: [1] },
      { a: Array.from({ length: 151 }, (_, i) => i) },
    ]) {
      expect(codeOf(() => parseFilterPolicy(bad)), JSON.stringify(bad)).toBe('BAD_REQUEST');
    }
  });

  it('a numeric range matches exactly the numbers between its bounds', () => {
    fc.assert(
      fc.property(fc.integer({ min: -1000, max: 1000 }), fc.integer({ min: 1, max: 500 }), fc.integer({ min: -2000, max: 2000 }), fc.boolean(), fc.boolean(), (low, width, value, lowInclusive, highInclusive) => {
        const high = low + width;
        const policy = { n: [{ numeric: [lowInclusive ? '>=' : '>', low, highInclusive ? '<=' : '<', high] }] };
        const expected = (lowInclusive ? value >= low : value > low) && (highInclusive ? value <= high : value < high);
        expect(matches(policy, { n: value })).toBe(expected);
      }),
    );
  });
});
